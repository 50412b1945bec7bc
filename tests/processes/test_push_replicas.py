"""A pushed queue's `max_running` with two `jobq serve` processes delivering at once:
the endpoint (real HTTP on loopback) never has more deliveries in flight than the
limit, the limit is reached, and every job is delivered and succeeds."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.delivery import new_secret
from tests.conftest import plain
from tests.delivery_endpoint import Answer, Endpoint, Received, serving
from tests.processes.replicas import Replica, stop_all

pytestmark = pytest.mark.once("embedded")

JOBS = 150
MAX_RUNNING = 4
QUEUE = "pushed-replicas"  # this test's own: the session's database is shared
PUSH = {"JOBQ_PUSH_ALLOWED_TARGETS": "http://127.0.0.1:*", "JOBQ_PUSH_CONCURRENCY": "16"}


class Counting(Endpoint):
    """Answers 200 after 20 ms, counting the deliveries in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.most = 0

    async def answer(self, got: Received) -> Answer:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.02)
        finally:
            self.now -= 1
        return 200, {"content-type": "application/json"}, b'{"ok": true}'


def test_max_running_holds_for_deliveries_from_two_processes(
    database_url: str, tmp_path: Path
) -> None:
    replicas: list[Replica] = []

    async def run() -> tuple[int, int, int]:
        async with serving(Counting()) as endpoint:
            for name in ("first", "second"):
                replicas.append(
                    await asyncio.to_thread(Replica, database_url, tmp_path / f"{name}.log", **PUSH)
                )
            first, second = replicas
            async with httpx.AsyncClient(timeout=30) as http:
                # jobs first, then the target: both replicas find them due at once
                jobs = [{"type": "t", "payload": {"i": i}} for i in range(JOBS)]
                made = await http.post(
                    f"{second.url}/v1/queues/{QUEUE}/jobs/batch", json={"jobs": jobs}
                )
                assert made.status_code == 201, made.text
                settings = {
                    "max_running": MAX_RUNNING,
                    "push": {"url": endpoint.base + "/hook", "secrets": [new_secret()]},
                }
                put = await http.put(f"{first.url}/v1/queues/{QUEUE}/settings", json=settings)
                assert put.status_code == 200, put.text
            conn = await asyncpg.connect(plain(database_url))
            try:
                deadline = time.monotonic() + 90
                left = JOBS
                while left and time.monotonic() < deadline:
                    left = await conn.fetchval(
                        "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND state <> 'succeeded'",
                        QUEUE,
                    )
                    await asyncio.sleep(0.1)
                workers = await conn.fetchval(
                    "SELECT count(DISTINCT worker_id) FROM jobq.jobs WHERE queue = $1", QUEUE
                )
            finally:
                await conn.close()
            return left, endpoint.most, workers

    try:
        left, most, workers = asyncio.run(run())
    finally:
        stop_all(replicas)
    assert left == 0, f"{left} jobs not delivered"
    assert most == MAX_RUNNING, most  # reached, never exceeded
    assert workers == 2  # both replicas delivered
