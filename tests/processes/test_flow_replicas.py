"""A queue's limits on two `jobq serve` processes at once, one of them restarted midway,
half of the workers acking with complete-and-lease: sampled all along, never more
running than `max_running` or `max_running_per_key`, the limit reached, every job done."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import plain
from tests.processes.replicas import Replica, stop_all

# Processes running jobq's own logic, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("embedded")

JOBS = 400
MAX_RUNNING = 6
# A queue of this test's own: the session's database is shared, and a queue name another
# test also uses may hold that test's jobs (the workers below count every ack).
QUEUE = "limited-replicas"
WORKERS = 12  # leasing 4 each: twice what the limit allows
# The jobs the killed replica's workers held come back soon: the reaper looks every half
# second, and their retry waits a tenth of a second, not the default ten (the test took
# 18 s, 10 of them waiting for the last six jobs' backoff).
QUICK_RECOVERY = {"JOBQ_REAPER_INTERVAL_SECONDS": "0.5", "JOBQ_BACKOFF_BASE_SECONDS": "0.1"}


async def _worker(urls: list[str], number: int, stop: asyncio.Event) -> int:
    """Lease 4, hold them a moment, ack them; through `urls[number % 2]` as it changes.
    Every other pair of workers acks with complete-and-lease, leasing its next 4."""
    done = 0
    body = {
        "queues": [QUEUE],
        "max_jobs": 4,
        "wait_seconds": 0.5,
        "lease_seconds": 3,  # leases a killed replica's workers never ack come back soon
        "worker_id": f"w{number}",
    }
    ack_lease = number % 4 >= 2
    leases: list[dict[str, Any]] = []
    while not stop.is_set():
        try:
            async with httpx.AsyncClient(base_url=urls[number % 2], timeout=30) as http:
                while not stop.is_set():
                    if not leases:
                        leases = (await http.post("/v1/leases", json=body)).json()["leases"]
                    if not leases:
                        continue
                    await asyncio.sleep(0.01)
                    acks = [{"lease_id": x["lease_id"], "outcome": "complete"} for x in leases]
                    ack = {"acks": acks, "lease": body} if ack_lease else {"acks": acks}
                    leases = []  # an ack lost with its replica: their leases lapse
                    answer = (await http.post("/v1/acks", json=ack)).json()
                    done += sum(1 for r in answer["results"] if r["status"] == 200)
                    leases = answer.get("leases") or []
        except httpx.TransportError:  # its replica is restarting: go again, maybe elsewhere
            await asyncio.sleep(0.2)
    return done


async def _sample(database_url: str, stop: asyncio.Event) -> tuple[int, int, int]:
    most = most_per_key = samples = 0
    conn = await asyncpg.connect(plain(database_url))
    try:
        while not stop.is_set():
            row = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running') AS running,"
                "       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running'"
                "           AND concurrency_key IS NOT NULL"
                "         GROUP BY concurrency_key) AS keys) AS per_key",
                QUEUE,
            )
            assert row is not None
            most, most_per_key = max(most, row["running"]), max(most_per_key, row["per_key"])
            samples += 1
            await asyncio.sleep(0.003)
    finally:
        await conn.close()
    return most, most_per_key, samples


def test_limits_hold_on_two_processes_through_a_restart(database_url: str, tmp_path: Path) -> None:
    first = Replica(database_url, tmp_path / "first.log", **QUICK_RECOVERY)
    second = Replica(database_url, tmp_path / "second.log", **QUICK_RECOVERY)
    try:
        settings = {"max_running": MAX_RUNNING, "max_running_per_key": 2}
        assert httpx.put(f"{first.url}/v1/queues/{QUEUE}/settings", json=settings).is_success
        jobs = [{"type": "t", "concurrency_key": f"k{i % 5}"} for i in range(JOBS)]
        created = httpx.post(f"{second.url}/v1/queues/{QUEUE}/jobs/batch", json={"jobs": jobs})
        assert created.status_code == 201

        async def run() -> tuple[list[int], tuple[int, int, int], int]:
            nonlocal second
            stop, finished = asyncio.Event(), asyncio.Event()
            sampling = asyncio.create_task(_sample(database_url, stop))
            urls = [first.url, second.url]
            workers = [asyncio.create_task(_worker(urls, i, finished)) for i in range(WORKERS)]
            await asyncio.sleep(1.0)
            second.kill()  # its workers' calls fail meanwhile; their leases expire
            again = tmp_path / "again.log"
            second = await asyncio.to_thread(Replica, database_url, again, **QUICK_RECOVERY)
            urls[1] = second.url
            conn = await asyncpg.connect(plain(database_url))
            try:
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    left = await conn.fetchval(
                        "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND state <> 'succeeded'",
                        QUEUE,
                    )
                    if left == 0:
                        break
                    await asyncio.sleep(0.2)
            finally:
                await conn.close()
            finished.set()
            done = await asyncio.gather(*workers)
            stop.set()
            return done, await sampling, left

        done, (most, most_per_key, samples), left = asyncio.run(run())
    finally:
        stop_all([first, second])
    assert samples > 100
    assert most == MAX_RUNNING, most  # reached, never exceeded
    assert most_per_key <= 2
    # each job acked once at most (an ack's answer may die with its replica), and all done
    assert JOBS - WORKERS * 4 <= sum(done) <= JOBS
    assert left == 0, f"{left} jobs not done"
