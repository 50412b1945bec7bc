"""The fair load: a fair queue with per-key limits, one tenant flooding it, through the
same faults.

The harness makes `FAIR_QUEUE` fair (`ordering: fair`) with `max_running` and
`rate_limit_per_key` (a fair queue's per-key limit: its turns go by fairness key, and it
takes no `max_running_per_key`). The flood (`FLOOD_JOBS` of key
`flood`) is enqueued at once; `SMALL_KEYS` tenants enqueue `SMALL_JOBS` each at a steady
pace over the producers' window. `LEASERS` lease loops hold each job `HOLD_SECONDS`
before completing it. A sampler reads the queue's running jobs every `SAMPLE_SECONDS`.

The invariants (`check_fair`): no sample saw more than `MAX_RUNNING` running; no tenant
was leased more than `KEY_RATE` jobs in any window of `KEY_RATE_SECONDS` (from the
leases' own times: every attempt's `started_at` is its lease statement's time, the time
the limit is judged at); the small tenants' median wait from enqueue to first lease is
under half the flood's (in a fifo queue they would wait behind the flood); every
job succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.processes.chaos import FAIR_QUEUE, Api, GaveUp
from tests.processes.chaos.databases import Db

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict

MAX_RUNNING = 4
KEY_RATE = 5
KEY_RATE_SECONDS = 1
FLOOD_JOBS = 60
SMALL_KEYS = 3
SMALL_JOBS = 15
JOBS = FLOOD_JOBS + SMALL_KEYS * SMALL_JOBS
LEASERS = 4
HOLD_SECONDS = 0.03
SAMPLE_SECONDS = 0.02
LEASE_SECONDS = 5
FAIR_SHARE = 0.5  # the small tenants' median wait, at most this part of the flood's


def _job(key: str, n: int) -> dict[str, Any]:
    return {
        "type": "fair.step",
        "fairness_key": key,
        "idempotency_key": f"fair-{key}-{n}",
        "max_attempts": 25,
    }


@dataclass
class FairLoad:
    api: Api
    db: Db
    duration: float
    most_running: int = 0
    samples: int = 0
    submitted: bool = False

    async def run(self) -> None:
        settings = {
            "ordering": "fair",
            "max_running": MAX_RUNNING,
            "rate_limit_per_key": {"jobs": KEY_RATE, "per_seconds": KEY_RATE_SECONDS},
        }
        response, _ = await self.api.call(
            "fair_settings", f"/v1/queues/{FAIR_QUEUE}/settings", settings, method="PUT"
        )
        if response.status_code != 200:
            raise AssertionError(f"fair settings: {response.status_code} {response.text}")
        tasks = [asyncio.create_task(self.lease_loop(f"fair-{i}")) for i in range(LEASERS)]
        tasks.append(asyncio.create_task(self.sample()))
        try:
            await self.submit()
            self.submitted = True
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def enqueue(self, jobs: list[dict[str, Any]]) -> None:
        response, _ = await self.api.call(
            "fair_enqueue", f"/v1/queues/{FAIR_QUEUE}/jobs/batch", {"jobs": jobs}
        )
        if response.status_code != 201:
            raise AssertionError(f"fair enqueue: {response.status_code} {response.text}")

    async def submit(self) -> None:
        """The flood at once, then each small tenant's jobs at a steady pace."""
        for start in range(0, FLOOD_JOBS, 30):
            await self.enqueue([_job("flood", n) for n in range(start, start + 30)])
        began = time.monotonic()
        for n in range(SMALL_JOBS):
            await self.enqueue([_job(f"tenant-{k}", n) for k in range(SMALL_KEYS)])
            pace = began + self.duration * (n + 1) / SMALL_JOBS - time.monotonic()
            await asyncio.sleep(max(0.0, pace))

    async def lease_loop(self, worker: str) -> None:
        body = {
            "queues": [FAIR_QUEUE],
            "max_jobs": 3,
            "wait_seconds": 1,
            "lease_seconds": LEASE_SECONDS,
            "worker_id": worker,
        }
        while True:
            try:
                response, _ = await self.api.call("fair_lease", "/v1/leases", body)
            except GaveUp:
                continue
            if response.status_code != 200:
                await asyncio.sleep(0.2)
                continue
            leases: list[dict[str, Any]] = response.json()["leases"]
            if not leases:
                continue
            await asyncio.sleep(HOLD_SECONDS)
            for lease in leases:
                with contextlib.suppress(GaveUp):  # else it expires and runs again
                    await self.api.call(
                        "fair_finish", f"/v1/leases/{lease['lease_id']}/complete", {}
                    )

    async def sample(self) -> None:
        while True:
            rows = await self.db.fetch_quietly(
                "SELECT count(*) AS running FROM jobq.jobs WHERE queue = $1 AND state = 'running'",
                FAIR_QUEUE,
            )
            if rows is not None:
                self.samples += 1
                self.most_running = max(self.most_running, rows[0]["running"])
            await asyncio.sleep(SAMPLE_SECONDS)

    async def done(self) -> bool:
        if not self.submitted:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state = 'succeeded') AS done FROM jobq.jobs"
            " WHERE queue = $1",
            FAIR_QUEUE,
        )
        return rows is not None and rows[0]["done"] == JOBS


def busiest_window(starts: list[datetime]) -> int:
    """The most leases in any window (t - KEY_RATE_SECONDS, t] of sorted `starts`."""
    most, first = 0, 0
    span = timedelta(seconds=KEY_RATE_SECONDS)
    for last, at in enumerate(starts):
        while starts[first] <= at - span:
            first += 1
        most = max(most, last - first + 1)
    return most


async def check_fair(load: FairLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The fair queue's invariants; failures go to the verdict."""
    if load.most_running > MAX_RUNNING:
        v.fail("a fair queue's max_running was exceeded", f"{load.most_running} running")
    rows = await db.fetch(
        "SELECT j.fairness_key AS key, j.state::text AS state, j.created_at,"
        "       array(SELECT CAST(a->>'started_at' AS timestamptz)"
        "               FROM jsonb_array_elements(jobq.attempts_of(j)) AS a) AS starts"
        "  FROM jobq.jobs j WHERE j.queue = $1",
        FAIR_QUEUE,
    )
    states = {r["state"] for r in rows}
    if len(rows) != JOBS or states != {"succeeded"}:
        v.fail("a fair job did not succeed", f"{len(rows)} jobs, states {sorted(states)}")
    starts: dict[str, list[datetime]] = {}
    waits: dict[str, list[float]] = {}
    for r in rows:
        starts.setdefault(r["key"], []).extend(r["starts"])
        if r["starts"]:
            wait = (min(r["starts"]) - r["created_at"]).total_seconds()
            waits.setdefault("flood" if r["key"] == "flood" else "small", []).append(wait)
    busiest = {key: busiest_window(sorted(times)) for key, times in starts.items()}
    for key, most in busiest.items():
        if most > KEY_RATE:
            v.fail(
                "rate_limit_per_key was exceeded",
                f"{key}: {most} leases in {KEY_RATE_SECONDS} s, limit {KEY_RATE}",
            )
    flood = statistics.median(waits.get("flood") or [0.0])
    small = statistics.median(waits.get("small") or [0.0])
    if small > FAIR_SHARE * flood:
        v.fail(
            "the small tenants waited behind the flood",
            f"median wait {small:.2f} s, the flood's {flood:.2f} s",
        )
    return {
        "jobs": JOBS,
        "flood": FLOOD_JOBS,
        "max_running": MAX_RUNNING,
        "most_running": load.most_running,
        "key_rate": KEY_RATE,
        "busiest_window": max(busiest.values(), default=0),
        "small_wait_p50": round(small, 3),
        "flood_wait_p50": round(flood, 3),
        "samples": load.samples,
    }
