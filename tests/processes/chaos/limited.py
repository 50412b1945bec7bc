"""The limited load: one queue with `max_running` and `max_running_per_key`, worked by
more leasers than its limits allow, through the same faults.

The harness sets `LIMITED_QUEUE`'s limits, enqueues `LIMITED_JOBS` jobs over the
producers' window (each with one of `KEYS` concurrency keys), and runs `LEASERS` lease
loops that hold each job `HOLD_SECONDS` before completing it, so that the limits bind;
half of them complete with complete-and-lease, taking their next jobs in the ack call.
A sampler reads the queue's running jobs every `SAMPLE_SECONDS` (skipping reads while
PostgreSQL is down).

The invariants (`check_limited`): no sample saw more than `MAX_RUNNING` jobs running,
or more than `PER_KEY` of one key; the limit was reached; every job succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.processes.chaos import LIMITED_QUEUE, Api, GaveUp
from tests.processes.chaos.databases import Db

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict

MAX_RUNNING = 4
PER_KEY = 1
KEYS = 12
LIMITED_JOBS = 300
LEASERS = 6
HOLD_SECONDS = 0.03
SAMPLE_SECONDS = 0.02
LEASE_SECONDS = 5


@dataclass
class LimitedLoad:
    api: Api
    db: Db
    duration: float
    enqueued: int = 0
    most_running: int = 0
    most_per_key: int = 0
    samples: int = 0
    submitted: bool = False

    async def run(self) -> None:
        response, _ = await self.api.call(
            "limit",
            f"/v1/queues/{LIMITED_QUEUE}/settings",
            {"max_running": MAX_RUNNING, "max_running_per_key": PER_KEY},
            method="PUT",
        )
        if response.status_code != 200:
            raise AssertionError(f"limits: {response.status_code} {response.text}")
        tasks = [
            asyncio.create_task(self.lease_loop(f"limited-{i}", ack_lease=i % 2 == 1))
            for i in range(LEASERS)
        ]
        tasks.append(asyncio.create_task(self.sample()))
        try:
            await self.submit()
            self.submitted = True
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def submit(self) -> None:
        began = time.monotonic()
        batch = 10
        for start in range(0, LIMITED_JOBS, batch):
            jobs = [
                {
                    "type": "limited.step",
                    "concurrency_key": f"key-{i % KEYS}",
                    "idempotency_key": f"limited-{i}",
                    "max_attempts": 25,
                }
                for i in range(start, start + batch)
            ]
            response, _ = await self.api.call(
                "limited_enqueue", f"/v1/queues/{LIMITED_QUEUE}/jobs/batch", {"jobs": jobs}
            )
            if response.status_code != 201:
                raise AssertionError(f"limited enqueue: {response.status_code} {response.text}")
            self.enqueued += batch
            pace = began + self.duration * (start + batch) / LIMITED_JOBS - time.monotonic()
            await asyncio.sleep(max(0.0, pace))

    async def lease_loop(self, worker: str, *, ack_lease: bool) -> None:
        """Lease up to 3, hold them, complete each; or (`ack_lease`) complete them in one
        ack call that leases the next ones (complete-and-lease)."""
        body = {
            "queues": [LIMITED_QUEUE],
            "max_jobs": 3,
            "wait_seconds": 1,
            "lease_seconds": LEASE_SECONDS,
            "worker_id": worker,
        }
        leases: list[dict[str, Any]] = []
        while True:
            if not leases:
                leases = await self.lease(body)
            if not leases:
                continue
            await asyncio.sleep(HOLD_SECONDS)
            if ack_lease:
                leases = await self.ack_and_lease(leases, body)
                continue
            for lease in leases:
                with contextlib.suppress(GaveUp):  # else it expires and runs again
                    await self.api.call(
                        "limited_finish", f"/v1/leases/{lease['lease_id']}/complete", {}
                    )
            leases = []

    async def lease(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return await self.leases_of("limited_lease", "/v1/leases", body)

    async def ack_and_lease(
        self, leases: list[dict[str, Any]], body: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Complete `leases` and lease the next ones; none when the call failed (the
        leases it took lapse, and their jobs run again)."""
        acks = [{"lease_id": lease["lease_id"], "outcome": "complete"} for lease in leases]
        return await self.leases_of("limited_ack_lease", "/v1/acks", {"acks": acks, "lease": body})

    async def leases_of(self, op: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The leases a leasing call answered; none when it failed."""
        try:
            response, _ = await self.api.call(op, path, body)
        except GaveUp:
            return []
        if response.status_code != 200:
            await asyncio.sleep(0.2)
            return []
        leases: list[dict[str, Any]] = response.json()["leases"]
        return leases

    async def sample(self) -> None:
        while True:
            rows = await self.db.fetch_quietly(
                "SELECT (SELECT count(*) FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running') AS running,"
                "       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running'"
                "         GROUP BY concurrency_key) AS keys) AS per_key",
                LIMITED_QUEUE,
            )
            if rows is not None:
                self.samples += 1
                self.most_running = max(self.most_running, rows[0]["running"])
                self.most_per_key = max(self.most_per_key, rows[0]["per_key"])
            await asyncio.sleep(SAMPLE_SECONDS)

    async def done(self) -> bool:
        if not self.submitted:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state = 'succeeded') AS done FROM jobq.jobs"
            " WHERE queue = $1",
            LIMITED_QUEUE,
        )
        return rows is not None and rows[0]["done"] == LIMITED_JOBS


async def check_limited(load: LimitedLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The limited queue's invariants; failures go to the verdict."""
    if load.most_running > MAX_RUNNING:
        v.fail("max_running was exceeded", f"{load.most_running} running, limit {MAX_RUNNING}")
    if load.most_per_key > PER_KEY:
        v.fail("max_running_per_key was exceeded", f"{load.most_per_key} of one key")
    if load.most_running < min(MAX_RUNNING, KEYS * PER_KEY):
        v.fail("the limit was never reached", f"at most {load.most_running} running")
    states = await db.fetch(
        "SELECT state::text, count(*) FROM jobq.jobs WHERE queue = $1 GROUP BY 1", LIMITED_QUEUE
    )
    by_state = {r["state"]: r["count"] for r in states}
    if by_state != {"succeeded": LIMITED_JOBS}:
        v.fail("a limited job did not succeed", str(by_state))
    return {
        "jobs": LIMITED_JOBS,
        "max_running": MAX_RUNNING,
        "most_running": load.most_running,
        "per_key": PER_KEY,
        "most_per_key": load.most_per_key,
        "samples": load.samples,
    }
