"""The faults: workers and a service killed, rolling restarts, a PostgreSQL restart, a stale
worker finishing a lease that was taken from it, forged announcements (NOTIFY payloads any
database role can send: garbage, NaN, infinities, huge counts, floods)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx

from tests.processes.chaos import (
    MAX_ATTEMPTS,
    QUEUE,
    STALE_QUEUE,
    Script,
    job_key,
    problem_code,
)
from tests.processes.chaos.evidence import lease_uuid
from tests.processes.chaos.options import (
    BLOCKED_TIMEOUT_SECONDS,
    DATABASE,
    INTERRUPTED_ENQUEUES,
    OUTAGE_HOLD_SECONDS,
    PROBES,
    RECOVERY_TIMEOUT_SECONDS,
    RESERVED_JOBS,
    UNAVAILABLE,
    HarnessError,
    say,
)
from tests.processes.chaos.procs import Fault, Probe, Service
from tests.processes.chaos.producer import Producer
from tests.processes.chaos.state import RunState

FORGE_SECONDS = 2.0
FORGED_DUE = [
    f"{QUEUE} NaN 1",
    f"{QUEUE} Infinity 1",
    f"{QUEUE} -Infinity",
    f"{QUEUE} 1e400 1",
    f"{QUEUE} 1 -1",
    f"{QUEUE} 1 99999999999999999999999999",
    "garbage",
    "",
    f"{QUEUE} 1 1 1",
]
FORGED_FINISHED = ["NaN", "-1", "1e3", "99999999999999999999999", "x", ""]


class FaultInjection(RunState):
    """The faults a run injects while the load goes on, on a timeline."""

    async def after(self, fraction: float, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` at `fraction` of the producers' window."""
        due = self.load_began + fraction * self.opts.produce_seconds
        await asyncio.sleep(max(0.0, due - time.time()))
        await action()

    def schedule(self) -> list[tuple[float, Callable[[], Awaitable[None]]]]:
        kills = self.opts.worker_kills
        plan: list[tuple[float, Callable[[], Awaitable[None]]]] = [
            (0.12, self.kill_worker),
            (0.25, self.kill_service),
            (0.40, self.restart_postgres),
            (0.50, self.forge_announcements),
            (0.55, self.kill_worker),
            (0.65, self.rolling_restart),
        ]
        for k in range(max(0, kills - 2)):
            plan.append((0.8 + 0.15 * k / max(1, kills - 2), self.kill_worker))
        return sorted(plan, key=lambda step: step[0])

    async def timeline(self) -> None:
        """Each fault at its time, or when the one before is over."""
        for fraction, action in self.schedule():
            await self.after(fraction, action)
        # a kill that found its worker idle does not count: try again
        for _ in range(3):
            hits = sum(
                1 for f in self.faults if f.kind == "worker_sigkill" and f.detail["in_flight"]
            )
            if hits >= min(2, self.opts.worker_kills):
                break
            await self.kill_worker()

    def fault(self, kind: str, started: float, **detail: Any) -> Fault:
        fault = Fault(kind, started, time.time(), detail)
        self.faults.append(fault)
        return fault

    async def kill_worker(self) -> None:
        worker = self.rng.choice(self.workers)
        for _ in range(40):  # up to 2 s for it to hold a job
            if worker.in_flight():
                break
            await asyncio.sleep(0.05)
        started = time.time()
        pid = worker.pid
        self.killed_pids.add(pid)
        worker.kill()
        in_flight = worker.in_flight()
        worker.start()
        self.fault("worker_sigkill", started, worker=worker.name, pid=pid, in_flight=len(in_flight))
        say(
            f"{self.elapsed()} FAULT worker SIGKILL: {worker.name} (pid {pid}),"
            f" {len(in_flight)} executions in flight"
        )

    async def forge_announcements(self) -> None:
        """Flood jobq_due and jobq_finished with malformed and well-formed payloads for
        FORGE_SECONDS: every service must drop the malformed ones (its
        jobq_announcements_dropped counter rises) and go on working (the run's checks)."""
        assert self.db is not None
        before = {s.name: await self.dropped(s) for s in self.services}
        started = time.time()
        sender = await asyncpg.connect(self.db.dsn)
        sent = 0
        try:
            deadline = time.monotonic() + FORGE_SECONDS
            while time.monotonic() < deadline:
                due = [*FORGED_DUE, f"{QUEUE} {time.time():.6f} 1", f"{QUEUE} {time.time():.6f}"]
                for channel, payloads in (("jobq_due", due), ("jobq_finished", FORGED_FINISHED)):
                    await sender.execute(
                        "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", channel, payloads
                    )
                    sent += len(payloads)
                await asyncio.sleep(0.01)
        finally:
            await sender.close()
        after = {s.name: await self.dropped(s) for s in self.services}
        dropped = {name: after[name] - before[name] for name in after}
        self.fault("forged_announcements", started, sent=sent, dropped=dropped)
        say(f"{self.elapsed()} FAULT forged announcements: {sent} sent, dropped {dropped}")

    async def dropped(self, service: Service) -> float:
        """The malformed announcements `service` has dropped so far (its /metrics)."""
        try:
            text = (await self.http.get(f"{service.url}/metrics")).text
        except httpx.HTTPError:
            return 0.0
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("jobq_announcements_dropped_total{")
        )

    async def kill_service(self) -> None:
        """SIGKILL a service while two enqueues it took are committing, then retry them.

        The harness holds an uncommitted job with the same idempotency key as each
        enqueue, so the service's INSERTs wait in PostgreSQL; the service is killed, the
        harness rolls back, the orphaned INSERTs commit with nobody left to answer. The
        producer's retry with the same keys must find those jobs, not make new ones.
        """
        assert self.db is not None
        service = self.rng.choice(self.services)
        producer = Producer(self.api_client(), self.events, self.opts.run, self.opts.seed)
        single = self.opts.jobs - RESERVED_JOBS
        batch = list(range(single + 1, self.opts.jobs))
        keys = [job_key(self.opts.run, i) for i in (single, batch[0])]
        assert len(keys) == INTERRUPTED_ENQUEUES
        blocker = await asyncpg.connect(self.db.dsn)
        try:
            hold = blocker.transaction()
            await hold.start()
            for key in keys:
                await blocker.execute(
                    "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds,"
                    " idempotency_key) VALUES ($1, 'blocker', '{}', 1, 1, $2)",
                    QUEUE,
                    key,
                )
            sends = [
                asyncio.create_task(
                    self.http.post(
                        f"{service.url}/v1/queues/{QUEUE}/jobs",
                        json=producer.job(single),
                        headers={"Idempotency-Key": keys[0]},
                    )
                ),
                asyncio.create_task(
                    self.http.post(
                        f"{service.url}/v1/queues/{QUEUE}/jobs/batch",
                        json={
                            "jobs": [
                                {**producer.job(i), "idempotency_key": job_key(self.opts.run, i)}
                                for i in batch
                            ]
                        },
                    )
                ),
            ]
            blocked = await self.wait_blocked(blocker, INTERRUPTED_ENQUEUES)
            started = time.time()
            gone = service.kill()
            await hold.rollback()
        finally:
            await blocker.close()
        answered = [
            not isinstance(r, Exception)
            for r in await asyncio.gather(*sends, return_exceptions=True)
        ]
        committed = await self.wait_committed(keys)
        await asyncio.sleep(0.2)
        service.start()
        # the producer's retries, same keys, to any service (the killed one is starting)
        await producer.enqueue_one(single)
        await producer.enqueue_batch(batch)
        await service.wait_ready(self.http)
        self.fault(
            "service_sigkill",
            started,
            service=service.name,
            pid=gone.pid,
            enqueues_blocked=blocked,
            enqueues_answered=sum(answered),
            enqueues_committed_after_crash=committed,
        )
        say(
            f"{self.elapsed()} FAULT service SIGKILL: {service.name} (pid {gone.pid}) with"
            f" {blocked} enqueues seen waiting in PostgreSQL, {committed} committed after the"
            f" crash and retried;"
            f" back in {time.time() - started:.1f}s"
        )

    async def wait_blocked(self, blocker: asyncpg.Connection, count: int) -> int:
        """Until `count` statements wait on the blocker's transaction (or a timeout)."""
        deadline = time.monotonic() + BLOCKED_TIMEOUT_SECONDS
        waiting = 0
        while time.monotonic() < deadline:
            waiting = await blocker.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
                " AND $2 = ANY(pg_blocking_pids(pid))",
                DATABASE,
                blocker.get_server_pid(),
            )
            if waiting >= count:
                break
            await asyncio.sleep(0.02)
        return int(waiting)

    async def wait_committed(self, keys: list[str]) -> int:
        """How many of the keys' jobs exist once the orphaned INSERTs had time to commit."""
        assert self.db is not None
        deadline = time.monotonic() + BLOCKED_TIMEOUT_SECONDS
        found = 0
        while time.monotonic() < deadline:
            rows = await self.db.fetch_quietly(
                "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND idempotency_key = ANY($2)",
                QUEUE,
                keys,
            )
            found = rows[0][0] if rows else 0
            if found == len(keys):
                break
            await asyncio.sleep(0.05)
        return found

    async def rolling_restart(self) -> None:
        for service in self.services:
            started = time.time()
            gone = await service.stop()
            service.start()
            await service.wait_ready(self.http)
            self.fault(
                "rolling_restart",
                started,
                service=service.name,
                pid=gone.pid,
                returncode=gone.returncode,
            )
            say(
                f"{self.elapsed()} FAULT service SIGTERM restart: {service.name} exited"
                f" {gone.returncode}, back in {time.time() - started:.1f}s"
            )

    async def restart_postgres(self) -> None:
        """Restart PostgreSQL while probing every service's /v1/jobs and /readyz; the
        producers' last jobs wait for it to be over (the restart falls inside the load)."""
        try:
            await self._restart_postgres()
        finally:
            self.producers_gate.touch()

    async def _restart_postgres(self) -> None:
        assert self.database is not None
        stop_probing = asyncio.Event()
        probing = asyncio.create_task(self.probe(stop_probing))
        await asyncio.sleep(0.3)
        started = time.time()
        await asyncio.to_thread(self.database.stop)
        stopped = time.time()
        # Stopped, PostgreSQL stays away until every service has answered both probes
        # with a 503 (a starved harness may take a while to ask), then starts again.
        deadline = time.monotonic() + OUTAGE_HOLD_SECONDS
        while time.monotonic() < deadline and not self.refused_by_all(stopped):
            await asyncio.sleep(0.05)
        starting = time.time()
        await asyncio.to_thread(self.database.start)
        ended = time.time()
        recovered: dict[str, float] = {}
        deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
        while time.monotonic() < deadline and len(recovered) < len(self.services):
            await asyncio.sleep(0.1)
            recovered = self.recovered(ended)
        stop_probing.set()
        await probing
        away = [p for p in self.probes if p.within(stopped, starting)]
        down = [p for p in self.probes if started <= p.sent <= ended]
        unavailable = sum(1 for p in away if p.code == UNAVAILABLE)
        slowest = max((p.seconds for p in down), default=0.0)
        self.fault(
            "postgres_restart",
            started,
            restart_seconds=round(ended - started, 3),
            away=(stopped, starting),
            recovered_seconds={k: round(v, 3) for k, v in sorted(recovered.items())},
        )
        say(
            f"{self.elapsed()} FAULT PostgreSQL fast restart: {ended - started:.1f}s, stopped"
            f" for {starting - stopped:.1f}s; {unavailable} of {len(away)} probes meanwhile"
            f" answered 503 {UNAVAILABLE}, slowest {slowest:.3f}s;"
            f" all services recovered: {len(recovered) == len(self.services)}"
        )

    def refused_by_all(self, since: float) -> bool:
        """Every service has answered both probes sent after `since` with a 503."""
        refused = {(p.service, p.path) for p in self.probes if p.sent >= since and p.status == 503}
        return all((s.name, path) in refused for s in self.services for path in PROBES)

    def recovered(self, since: float) -> dict[str, float]:
        """Per service, how long after `since` both its probes were first answered 200."""
        first: dict[tuple[str, str], float] = {}
        for p in self.probes:
            if p.sent >= since and p.status == 200:
                answered = p.sent + p.seconds - since
                key = (p.service, p.path)
                first[key] = min(first.get(key, answered), answered)
        return {
            s.name: max(first[s.name, path] for path in PROBES)
            for s in self.services
            if all((s.name, path) in first for path in PROBES)
        }

    async def probe(self, stop: asyncio.Event) -> None:
        """Ask every service for a page of jobs and for its readiness every 25 ms."""

        async def one(service: Service, path: str) -> None:
            sent = time.time()
            try:
                response = await self.http.get(service.url + PROBES[path])
            except httpx.TransportError:
                self.probes.append(Probe(service.name, path, sent, time.time() - sent, None, None))
                return
            self.probes.append(
                Probe(
                    service.name,
                    path,
                    sent,
                    time.time() - sent,
                    response.status_code,
                    problem_code(response),
                )
            )

        while not stop.is_set():
            await asyncio.gather(*(one(s, path) for s in self.services for path in PROBES))
            await asyncio.sleep(0.025)

    # ---- the stale completer -------------------------------------------------------

    async def stale_completer(self) -> None:
        """Lease a job with a short lease, let the reaper take it, then try to finish it."""
        for number, variant in enumerate(("complete", "fail", "acks", "heartbeat"), start=1):
            await self.stale_once(number, variant)

    async def stale_once(self, number: int, variant: str) -> None:
        assert self.api is not None and self.db is not None
        started = time.time()
        key = f"{self.opts.run}-stale-{number}"
        self.stale_keys.append(key)
        body = {
            "type": "chaos.ok",
            "payload": Script("ok").payload(-number),
            "max_attempts": MAX_ATTEMPTS,
        }
        response, _ = await self.api.call(
            "enqueue", f"/v1/queues/{STALE_QUEUE}/jobs", body, headers={"Idempotency-Key": key}
        )
        job_id = response.json()["id"]
        self.events.write("enq", key=key, id=job_id, status=response.status_code, dedup=False)
        lease = await self.stale_lease(lease_seconds=1)
        fence = lease_uuid(lease)
        while True:  # until the reaper has taken the lease back
            rows = await self.db.fetch_quietly(
                "SELECT to_jsonb(j)::text AS row, attempts::text FROM jobq.jobs j WHERE id = $1",
                job_id,
            )
            if rows and any(
                a["lease_id"] == fence and a["outcome"] == "lease_expired"
                for a in json.loads(rows[0]["attempts"])
            ):
                before = rows[0]["row"]
                break
            if time.time() - started > 60:
                raise HarnessError(f"the reaper never took back the stale lease of job {job_id}")
            await asyncio.sleep(0.1)
        path, payload = {
            "complete": (f"/v1/leases/{lease}/complete", {"result": {"stale": True}}),
            "fail": (f"/v1/leases/{lease}/fail", {"error": {"type": "Stale"}, "retryable": True}),
            "acks": ("/v1/acks", {"acks": [{"lease_id": lease, "outcome": "complete"}]}),
            "heartbeat": (f"/v1/leases/{lease}/heartbeat", {}),
        }[variant]
        answer, sent = await self.api.call(f"stale_{variant}", path, payload)
        status, code = answer.status_code, problem_code(answer)
        if variant == "acks" and status == 200:
            status, code = (
                answer.json()["results"][0]["status"],
                answer.json()["results"][0]["code"],
            )
        rows = await self.db.fetch_when_up(
            "SELECT to_jsonb(j)::text AS row FROM jobq.jobs j WHERE id = $1", job_id
        )
        unchanged = rows[0]["row"] == before
        op = "complete" if variant == "acks" else variant
        self.stale_end(
            job_id, lease, op, "acks" if variant == "acks" else "single", status, code, sent
        )
        self.fault(
            "stale_completer",
            started,
            variant=variant,
            job=job_id,
            status=status,
            code=code,
            row_unchanged=unchanged,
        )
        say(
            f"{self.elapsed()} FAULT stale completer ({variant}) on job {job_id}:"
            f" {status} {code}, row unchanged: {unchanged}"
        )
        # and now finish it properly, like any worker
        lease = await self.stale_lease(lease_seconds=10)
        answer, sent = await self.api.call("complete", f"/v1/leases/{lease}/complete", {})
        self.stale_end(job_id, lease, "complete", "single", answer.status_code, None, sent)

    async def stale_lease(self, lease_seconds: int) -> str:
        """Lease the stale queue's one job (again after a lost answer, once it is reaped)."""
        assert self.api is not None
        while True:
            response, _ = await self.api.call(
                "lease",
                "/v1/leases",
                {
                    "queues": [STALE_QUEUE],
                    "max_jobs": 1,
                    "lease_seconds": lease_seconds,
                    "worker_id": "stale-completer",
                },
            )
            leases = response.json()["leases"] if response.status_code == 200 else []
            if leases:
                job = leases[0]["job"]
                token: str = leases[0]["lease_id"]
                self.events.write(
                    "start",
                    worker="stale-completer",
                    job=job["id"],
                    lease=token,
                    attempt=job["attempt"],
                    kind="ok",
                    plan="complete",
                )
                return token
            await asyncio.sleep(0.2)

    def stale_end(
        self, job: int, lease: str, op: str, via: str, status: int, code: str | None, sent: float
    ) -> None:
        self.events.write(
            "end",
            worker="stale-completer",
            job=job,
            lease=lease,
            plan="complete",
            op=op,
            via=via,
            status=status,
            code=code,
            t_sent=sent,
        )

    # ---- after the load ------------------------------------------------------------
