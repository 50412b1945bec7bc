"""A run's life: setting it up, the load of producers and workers, watching it, tearing down."""

from __future__ import annotations

import asyncio
import time

from tests.helpers import free_port
from tests.processes.chaos import (
    QUEUE,
    STALE_QUEUE,
    Api,
)
from tests.processes.chaos.databases import Db, EmbeddedDatabase, ExternalDatabase, recreate
from tests.processes.chaos.fair import FairLoad
from tests.processes.chaos.faults import FaultInjection
from tests.processes.chaos.lifecycle import LifecycleLoad
from tests.processes.chaos.limited import LimitedLoad
from tests.processes.chaos.options import (
    DATABASE,
    PG_DIRNAME,
    PROGRESS_EVERY_SECONDS,
    RESERVED_JOBS,
    SERVICES,
    HarnessError,
    say,
)
from tests.processes.chaos.procs import Client, Service, child_env
from tests.processes.chaos.push import PushLoad
from tests.processes.chaos.workflows import WorkflowLoad


class Run(FaultInjection):
    """One fault-injection run: set up, load, watch, tear down."""

    # ---- setup and teardown --------------------------------------------------------

    async def setup(self) -> None:
        opts = self.opts
        if opts.database_url:
            self.database = ExternalDatabase(opts.database_url, opts.pg_stop_cmd, opts.pg_start_cmd)
        else:
            self.database = await asyncio.to_thread(EmbeddedDatabase, self.run_dir / PG_DIRNAME)
        say(f"database: {self.database.description}")
        url = await recreate(self.database.server_url)
        self.db = Db(url)
        await asyncio.sleep(1.0)  # a leftover `jobq serve` on this database reconnects by then
        others = await self.db.fetch(
            "SELECT application_name, client_addr::text, client_port FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            DATABASE,
        )
        if others:
            raise HarnessError(
                f"something else uses {DATABASE} (a leftover jobq serve?): "
                + ", ".join(f"{r[0]} from {r[1]}:{r[2]}" for r in others)
            )
        self.services = [
            Service(i, free_port(), self.run_dir / "logs", url) for i in range(1, SERVICES + 1)
        ]
        for service in self.services:
            service.start()
        await asyncio.gather(*(s.wait_ready(self.http) for s in self.services))
        say("services: " + ", ".join(f"{s.name} on :{s.port}" for s in self.services))
        urls = ",".join(s.url for s in self.services)
        self.api = Api([s.url for s in self.services], self.events, role="harness")
        env = child_env({})
        self.workers = [
            Client(
                f"worker-{i}",
                "tests.processes.chaos.worker",
                ["--services", urls, "--name", f"w{i}"],
                self.run_dir,
                env,
            )
            for i in range(1, opts.workers + 1)
        ]
        produced = opts.jobs - RESERVED_JOBS  # the last ones: the interrupted enqueues
        shares = [produced // opts.producers] * opts.producers
        shares[-1] += produced - sum(shares)
        self.producers = []
        for i, count in enumerate(shares):
            args = [
                "--services",
                urls,
                "--run",
                opts.run,
                "--seed",
                str(opts.seed),
                "--first",
                str(sum(shares[:i])),
                "--count",
                str(count),
                "--duration",
                str(opts.produce_seconds),
                "--gate",
                str(self.producers_gate),
            ]
            self.producers.append(
                Client(
                    f"producer-{i + 1}", "tests.processes.chaos.producer", args, self.run_dir, env
                )
            )

    async def teardown(self) -> None:
        for proc in [*self.producers, *self.workers, *self.services]:
            proc.kill_all()
        if self.push is not None:
            await self.push.close()
        if self.api is not None:
            await self.api.aclose()
        await self.http.aclose()
        self.events.close()
        if self.database is not None:
            await asyncio.to_thread(self.database.close)

    # ---- the load ------------------------------------------------------------------

    async def load(self) -> None:
        """Producers and workers run while the timeline injects faults; until all is done."""
        self.load_began = time.time()
        for proc in [*self.workers, *self.producers]:
            proc.start()
        say(
            f"load: {self.opts.jobs} jobs from {len(self.producers)} producers over "
            f"~{self.opts.produce_seconds:.0f}s, {len(self.workers)} workers"
        )
        assert self.api is not None and self.db is not None
        self.flows = WorkflowLoad(self.api, self.db, self.opts.seed, self.opts.produce_seconds)
        self.limited = LimitedLoad(self.api, self.db, self.opts.produce_seconds)
        self.lifecycle = LifecycleLoad(self.api, self.db, self.opts.seed, self.opts.produce_seconds)
        self.fair = FairLoad(self.api, self.db, self.opts.produce_seconds)
        self.push = PushLoad(self.api, self.db, self.opts.seed, self.opts.produce_seconds)
        await self.push.start()
        timeline = asyncio.create_task(self.timeline())
        stale = asyncio.create_task(self.after(0.2, self.stale_completer))
        flows = asyncio.create_task(self.flows.run())
        limited = asyncio.create_task(self.limited.run())
        lifecycle = asyncio.create_task(self.lifecycle.run())
        fair = asyncio.create_task(self.fair.run())
        pushed = asyncio.create_task(self.push.run())
        loads = (timeline, stale, flows, limited, lifecycle, fair, pushed)
        watch = asyncio.create_task(self.watch())
        try:
            deadline = time.monotonic() + self.opts.timeout
            while time.monotonic() < deadline:
                for task in loads:
                    failure = task.exception() if task.done() else None
                    if failure is not None:
                        raise failure
                if (
                    timeline.done()
                    and stale.done()
                    and await self.all_done()
                    and await self.flows.done()
                    and await self.limited.done()
                    and await self.lifecycle.done()
                    and await self.fair.done()
                    and await self.push.done()
                ):
                    self.finished = True
                    break
                await asyncio.sleep(0.5)
            else:
                say(
                    f"{self.elapsed()} TIMEOUT: the load did not finish in {self.opts.timeout:.0f}s"
                )
        finally:
            # A task that failed has raised its error above; the rest are cancelled, and
            # none of them may outlive the load (watch would restart what teardown kills).
            for task in (*loads, watch):
                task.cancel()
            await asyncio.gather(*loads, watch, return_exceptions=True)
            self.load_ended = time.time()
        self.collect_producers()
        await self.progress()
        for worker in self.workers:  # SIGTERM: they finish what is in hand, then exit
            if worker.running():
                await worker.stop(timeout=15)
        for producer in self.producers:
            if producer.running():
                await producer.stop(timeout=5)

    async def all_done(self) -> bool:
        if any(p.running() for p in self.producers):
            return False
        assert self.db is not None
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state IN ('queued', 'running')) AS open,"
            "       count(*) AS total FROM jobq.jobs WHERE queue = $1",
            QUEUE,
        )
        return rows is not None and rows[0]["open"] == 0 and rows[0]["total"] >= self.opts.jobs

    async def progress(self) -> None:
        assert self.db is not None
        rows = await self.db.fetch_quietly(
            "SELECT state::text, count(*) FROM jobq.jobs WHERE queue = $1 GROUP BY state", QUEUE
        )
        if rows is None:
            say(f"{self.elapsed()} (database unavailable)")
            return
        states = {row["state"]: row["count"] for row in rows}
        done = states.get("succeeded", 0) + states.get("failed", 0)
        say(
            f"{self.elapsed()} enqueued {sum(states.values())}/{self.opts.jobs}"
            f"  done {done} (succeeded {states.get('succeeded', 0)},"
            f" failed {states.get('failed', 0)})  running {states.get('running', 0)}"
            f"  queued {states.get('queued', 0)}  faults {len(self.faults)}"
        )

    async def watch(self) -> None:
        """Progress every few seconds; a service or worker that dies by itself is noted and
        started again; a producer's exit is collected."""
        last = 0.0
        while True:
            for proc in [*self.services, *self.workers]:
                gone = proc.reap()
                if gone is not None:
                    self.stray_exits.append(gone)
                    say(f"{self.elapsed()} {proc.name} (pid {gone.pid}) died by itself")
                    proc.start()
            self.collect_producers()
            if time.monotonic() - last >= PROGRESS_EVERY_SECONDS:
                last = time.monotonic()
                await self.progress()
            await asyncio.sleep(0.2)

    def collect_producers(self) -> None:
        """Note the exit of every producer that finished (its status is checked)."""
        for producer in self.producers:
            gone = producer.reap()
            if gone is not None:
                gone.how = "done"

    # ---- the faults ----------------------------------------------------------------

    async def read_api(self) -> None:
        """Every job as the API lists it: id → (state, attempt, attempts recorded)."""
        assert self.api is not None
        for queue in (QUEUE, STALE_QUEUE):
            after = 0
            while True:
                response, _ = await self.api.call(
                    "list", f"/v1/jobs?queue={queue}&limit=500&after={after}", method="GET"
                )
                page = response.json()
                for job in page["jobs"]:
                    self.api_view[job["id"]] = (job["state"], job["attempt"], len(job["attempts"]))
                if page["next_after"] is None:
                    break
                after = page["next_after"]

    async def stop_services(self) -> None:
        for service in self.services:
            if service.running():
                await service.stop()


# ---- the evidence ----------------------------------------------------------------------
