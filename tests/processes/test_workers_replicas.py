"""Quiet across replicas: an admin quiets a worker through one `jobq serve` while the
Python SDK worker leases from another; that replica learns it at its next presence
flush, and the worker, told at its next call, finishes the job it holds and leases no
more until resumed (through the first replica again)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from jobq_client import AsyncClient, Job, RetryPolicy, Worker
from tests.processes.replicas import Replica, stop_all
from tests.sdk_support import eventually, running

pytestmark = pytest.mark.once("embedded")

QUEUE = "quiet-replicas"  # this test's own: the session's database is shared
QUICK = {"JOBQ_WORKER_FLUSH_SECONDS": "0.3"}
FAST_RETRY = RetryPolicy(max_retries=3, backoff_seconds=0.05, max_backoff_seconds=0.2)


async def test_a_quiet_asked_of_one_replica_is_obeyed_by_a_worker_on_another(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    replicas = [
        await asyncio.to_thread(Replica, database_url, tmp_path / f"{name}.log", **QUICK)
        for name in ("a", "b")
    ]
    a, b = replicas
    try:
        async with (
            AsyncClient(a.url, retry=FAST_RETRY) as via_a,
            AsyncClient(b.url, retry=FAST_RETRY) as via_b,
        ):
            release = asyncio.Event()
            started: list[int] = []
            worker = Worker(via_b, queues=[QUEUE], worker_id="replica-worker", concurrency=1,
                            wait_seconds=0.2, presence_seconds=0.3)  # fmt: skip

            @worker.handler("work")
            async def work(job: Job) -> str:
                started.append(job.id)
                if len(started) == 1:
                    await release.wait()
                return "done"

            first = await via_a.enqueue(QUEUE, "work")
            async with running(worker):
                await eventually(lambda: asyncio.sleep(0, started == [first.id] or None))

                async def listed() -> bool:
                    return any(w.worker_id == "replica-worker" for w in await via_a.list_workers())

                await eventually(listed)
                assert await via_a.quiet_worker("replica-worker") is True
                second = await via_a.enqueue(QUEUE, "work")
                await asyncio.sleep(1.0)  # B's flushes read the quiet set back meanwhile
                release.set()
                assert (await via_a.wait(first.id, timeout=10)).state == "succeeded"
                await asyncio.sleep(1.5)  # several lease calls to B
                assert started == [first.id]
                assert (await via_a.get_job(second.id)).state == "queued"
                assert await via_a.resume_worker("replica-worker") is False
                assert (await via_a.wait(second.id, timeout=15)).state == "succeeded"
            assert started == [first.id, second.id]
    finally:
        await asyncio.to_thread(stop_all, replicas)
