"""The workflow load: DAGs of dependent jobs and cron schedules, through the same faults.

While the producers' window lasts, the harness itself (not a child process):

- submits a workflow every `WORKFLOW_EVERY_SECONDS`: one batch of `SHAPE`'s six jobs, the
  later ones depending on earlier ones by `{"ref": i}`, each with its idempotency key
  `flow-<k>-<node>`, some scripted to fail for good (`Fate`);
- makes a schedule every `SCHEDULE_EVERY_SECONDS`, every minute, `catch_up: all`,
  backdated `MISSED_MINUTES` so the services' schedulers catch up while faults go on;
- works the queue `FLOW_QUEUE` with `FLOW_WORKERS` lease loops: it completes a job, or
  fails it for good when its fate says so, and notes any parent a lease shows unfinished;
- hangs a chain of `DEEP_CHAIN` waiting jobs off one job of `DEEP_QUEUE` (one attempt,
  a short lease), leases that job and walks away: the reaper must fail it and cancel the
  whole chain, while it goes on reclaiming every other queue's expired leases (a chain
  this deep once made every reaper pass fail).

The invariants (`check_workflows`): each tick once (every minute from the backdated start
to the schedule's last tick, none twice), no child leased before its parents finished,
every job ends as its workflow says (a child of a failed or cancelled parent is cancelled
naming it, unless it runs anyway), none is left waiting; the deep chain's first job
failed and every job below it is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.processes.chaos import DEEP_QUEUE, FLOW_QUEUE, Api, GaveUp
from tests.processes.chaos.databases import Db

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict

WORKFLOW_EVERY_SECONDS = 0.5
SCHEDULE_EVERY_SECONDS = 4.0
MISSED_MINUTES = 20
FLOW_WORKERS = 2
FLOW_LEASE_SECONDS = 5
FATAL_SHARE = 0.12
DEEP_CHAIN = 600  # past the 300 to 500 levels where nested trigger calls gave out
DEEP_LEASE_SECONDS = 1

# node → (its parents, whether it runs after a failed parent): a diamond, then a tail
# that runs whatever happened above it, then one more step.
SHAPE: list[tuple[list[int], bool]] = [
    ([], False),
    ([0], False),
    ([0], False),
    ([1, 2], False),
    ([3], True),
    ([4], False),
]


def flow_key(workflow: int, node: int) -> str:
    return f"flow-{workflow}-{node}"


def fatal(seed: int, workflow: int, node: int) -> bool:
    """Whether this node fails for good when it runs: the same for everyone who asks."""
    return random.Random(f"{seed}:flow:{workflow}:{node}").random() < FATAL_SHARE


def expected_states(seed: int, workflow: int) -> list[str]:
    """How each node of a workflow must end."""
    states: list[str] = []
    for node, (parents, runs_anyway) in enumerate(SHAPE):
        if not runs_anyway and any(states[p] != "succeeded" for p in parents):
            states.append("cancelled")
        else:
            states.append("failed" if fatal(seed, workflow, node) else "succeeded")
    return states


@dataclass
class WorkflowLoad:
    api: Api
    db: Db
    seed: int
    duration: float
    workflows: int = 0
    schedules: dict[str, datetime] = field(default_factory=dict)  # name → backdated start
    early_leases: list[str] = field(default_factory=list)
    # this process's clock: when a job's first lease answer came, its first finish left
    leased_at: dict[int, float] = field(default_factory=dict)
    finish_sent: dict[int, float] = field(default_factory=dict)
    submitted: bool = False

    async def run(self) -> None:
        """Submit and schedule for `duration` seconds, working the queue all along."""
        workers = [asyncio.create_task(self.work(f"flow-{i}")) for i in range(FLOW_WORKERS)]
        try:
            await asyncio.gather(self.submit(), self.make_schedules(), self.abandon_deep_chain())
            self.submitted = True
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()

    async def submit(self) -> None:
        began = time.monotonic()
        while time.monotonic() - began < self.duration:
            k = self.workflows
            jobs: list[dict[str, Any]] = []
            for node, (parents, runs_anyway) in enumerate(SHAPE):
                job: dict[str, Any] = {
                    "type": "flow.step",
                    "payload": {"workflow": k, "node": node, "fatal": fatal(self.seed, k, node)},
                    "idempotency_key": flow_key(k, node),
                    "max_attempts": 25,
                }
                if parents:
                    job["depends_on"] = [{"ref": p} for p in parents]
                if runs_anyway:
                    job["on_parent_failure"] = "run"
                jobs.append(job)
            response, _ = await self.api.call(
                "flow_enqueue", f"/v1/queues/{FLOW_QUEUE}/jobs/batch", {"jobs": jobs}
            )
            if response.status_code != 201:
                raise AssertionError(f"workflow {k}: {response.status_code} {response.text}")
            self.workflows += 1
            await asyncio.sleep(WORKFLOW_EVERY_SECONDS)

    async def abandon_deep_chain(self) -> None:
        """A job with `DEEP_CHAIN` jobs waiting below it, leased and never finished."""
        root = {
            "type": "deep.root",
            "idempotency_key": "deep-root",
            "max_attempts": 1,
            "lease_seconds": DEEP_LEASE_SECONDS,
        }
        response, _ = await self.api.call("deep_enqueue", f"/v1/queues/{DEEP_QUEUE}/jobs", root)
        if response.status_code not in (200, 201):
            raise AssertionError(f"deep root: {response.status_code} {response.text}")
        chain: list[dict[str, Any]] = [
            {
                "type": "deep.link",
                "idempotency_key": f"deep-{i}",
                "depends_on": [response.json()["id"] if i == 0 else {"ref": i - 1}],
            }
            for i in range(DEEP_CHAIN)
        ]
        response, _ = await self.api.call(
            "deep_enqueue", f"/v1/queues/{DEEP_QUEUE}/jobs/batch", {"jobs": chain}
        )
        if response.status_code != 201:
            raise AssertionError(f"deep chain: {response.status_code} {response.text}")
        body = {"queues": [DEEP_QUEUE], "max_jobs": 1, "worker_id": "deep-abandoned"}
        response, _ = await self.api.call("deep_lease", "/v1/leases", body)
        if response.status_code != 200:
            raise AssertionError(f"deep lease: {response.status_code} {response.text}")

    async def make_schedules(self) -> None:
        began = time.monotonic()
        while time.monotonic() - began < self.duration:
            name = f"chaos-tick-{len(self.schedules)}"
            body = {
                "queue": FLOW_QUEUE,
                "type": "flow.tick",
                "cron": "* * * * *",
                "catch_up": "all",
                "catch_up_limit": 1000,
                "paused": True,
            }
            response, _ = await self.api.call(
                "schedule", f"/v1/schedules/{name}", body, method="PUT"
            )
            if response.status_code not in (200, 201):
                raise AssertionError(f"schedule {name}: {response.status_code} {response.text}")
            start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(
                minutes=MISSED_MINUTES
            )
            await self.db.fetch_when_up(
                "UPDATE jobq.schedules SET next_tick = $2, paused = false WHERE name = $1"
                " RETURNING name",
                name,
                start,
            )
            self.schedules[name] = start
            await asyncio.sleep(SCHEDULE_EVERY_SECONDS)

    async def work(self, worker: str) -> None:
        body = {
            "queues": [FLOW_QUEUE],
            "max_jobs": 20,
            "wait_seconds": 1,
            "lease_seconds": FLOW_LEASE_SECONDS,
            "worker_id": worker,
        }
        while True:
            try:
                response, _ = await self.api.call("flow_lease", "/v1/leases", body)
            except GaveUp:
                continue
            if response.status_code != 200:
                await asyncio.sleep(0.2)
                continue
            received = time.monotonic()
            leases = response.json()["leases"]
            for lease in leases:
                self.leased_at.setdefault(lease["job"]["id"], received)
            for lease in leases:
                await self.finish(lease)

    async def finish(self, lease: dict[str, Any]) -> None:
        job = lease["job"]
        runs_anyway = job["on_parent_failure"] == "run"
        for parent in lease["parents"]:
            done = ("succeeded", "failed", "cancelled") if runs_anyway else ("succeeded",)
            if parent["state"] not in done:
                self.early_leases.append(f"job {job['id']} leased while parent {parent['id']}"
                                         f" was {parent['state']}")  # fmt: skip
        token = lease["lease_id"]
        payload = job["payload"] if isinstance(job["payload"], dict) else {}
        if payload.get("fatal"):
            path, ack = (
                f"/v1/leases/{token}/fail",
                {
                    "error": {"type": "Fatal", "message": "scripted"},
                    "retryable": False,
                },
            )
        else:
            path, ack = f"/v1/leases/{token}/complete", {"result": {"job": job["id"]}}
        self.finish_sent.setdefault(job["id"], time.monotonic())
        with contextlib.suppress(GaveUp):  # else the lease expires and the job runs again
            await self.api.call("flow_finish", path, ack)

    async def done(self) -> bool:
        """Everything submitted, every schedule caught up, no flow job left open."""
        if not self.submitted:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT (SELECT count(*) FROM jobq.jobs WHERE queue = ANY($1)"
            "         AND state IN ('waiting', 'queued', 'running')) AS open,"
            "       (SELECT count(*) FROM jobq.schedules"
            "         WHERE name LIKE 'chaos-tick-%' AND last_tick IS NULL) AS behind",
            [FLOW_QUEUE, DEEP_QUEUE],
        )
        return rows is not None and rows[0]["open"] == 0 and rows[0]["behind"] == 0


async def check_workflows(load: WorkflowLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The workflow invariants, from the database; failures go to the verdict."""
    for example in load.early_leases:
        v.fail("a child was leased before its parents finished", example)
    jobs = {
        r["idempotency_key"]: r
        for r in await db.fetch(
            "SELECT id, idempotency_key, state::text AS state, last_error->>'type' AS error,"
            "       (last_error->'details'->>'parent_id')::bigint AS parent"
            "  FROM jobq.jobs WHERE queue = $1 AND type = 'flow.step'",
            FLOW_QUEUE,
        )
    }
    ids = {r["id"]: key for key, r in jobs.items()}
    states: dict[str, int] = {}
    for k in range(load.workflows):
        for node, expected in enumerate(expected_states(load.seed, k)):
            key = flow_key(k, node)
            found = jobs.get(key)
            if found is None:
                v.fail("a workflow job was lost", key)
                continue
            states[found["state"]] = states.get(found["state"], 0) + 1
            if found["state"] != expected:
                v.fail("a workflow job ended otherwise", f"{key}: {found['state']}, not {expected}")
            elif expected == "cancelled":
                parent_key = ids.get(found["parent"])
                parents = [flow_key(k, p) for p in SHAPE[node][0]]
                if found["error"] != "parent_failed" or parent_key not in parents:
                    v.fail("a cancelled child does not name its parent", key)
    # A child's lease answer cannot come before the call that finished its parent left.
    # (Not the rows' times: `started_at` is its lease transaction's start, which may come
    # before the snapshot that saw the child queued, by the statement's planning.)
    edges = await db.fetch(
        "SELECT d.child_id AS child, d.parent_id AS parent FROM jobq.job_dependencies d"
        "  JOIN jobq.jobs c ON c.id = d.child_id WHERE c.queue = $1",
        FLOW_QUEUE,
    )
    for edge in edges:
        leased = load.leased_at.get(edge["child"])
        finished = load.finish_sent.get(edge["parent"])
        if edge["parent"] not in load.leased_at:
            continue  # cancelled with its own parent: it never ran
        if leased is not None and (finished is None or leased < finished):
            v.fail(
                "a child was leased before its parent finished",
                f"{edge['child']} / {edge['parent']}",
            )
    deep = {
        r["key"]: r["state"]
        for r in await db.fetch(
            "SELECT idempotency_key AS key, state::text AS state FROM jobq.jobs WHERE queue = $1",
            DEEP_QUEUE,
        )
    }
    if deep.get("deep-root") != "failed":
        v.fail("the deep chain's abandoned job was not reaped", str(deep.get("deep-root")))
    chain_states = {deep.get(f"deep-{i}") for i in range(DEEP_CHAIN)}
    if chain_states != {"cancelled"}:
        v.fail("the deep chain was not cancelled whole", str(sorted(map(str, chain_states))))
    ticks = await db.fetch(
        "SELECT s.name, s.last_tick, array_agg((j.metadata->>'tick')::timestamptz"
        "       ORDER BY (j.metadata->>'tick')::timestamptz) FILTER (WHERE j.id IS NOT NULL)"
        "       AS made"
        "  FROM jobq.schedules s LEFT JOIN jobq.jobs j"
        "    ON j.queue = $1 AND j.type = 'flow.tick' AND j.metadata->>'schedule' = s.name"
        " GROUP BY s.name, s.last_tick",
        FLOW_QUEUE,
    )
    made_ticks = 0
    for row in ticks:
        start = load.schedules.get(row["name"])
        made = list(row["made"] or [])
        made_ticks += len(made)
        if start is None or row["last_tick"] is None:
            v.fail("a schedule did not catch up", row["name"])
            continue
        expected_ticks = []
        tick = start
        while tick <= row["last_tick"]:
            expected_ticks.append(tick)
            tick += timedelta(minutes=1)
        if len(made) != len(set(made)):
            v.fail("a tick was enqueued twice", row["name"])
        elif made != expected_ticks:
            missing = sorted(set(expected_ticks) - set(made))
            v.fail("a tick was lost", f"{row['name']}: {missing[:3]}")
    return {
        "deep_chain": DEEP_CHAIN,
        "workflows": load.workflows,
        "jobs": sum(states.values()),
        "states": dict(sorted(states.items())),
        "schedules": len(load.schedules),
        "ticks": made_ticks,
    }
