"""A handler sees cancellation, asked for with `POST /v1/jobs/{id}/cancel`, through its
heartbeats and stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from jobq_client import AsyncClient, Job, JobCancelled, JobRecord, RetryPolicy, Worker
from tests.sdk_support import Service, eventually, running_service

# The SDK's logic against a service, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from running_service(database_url, tmp_path_factory.mktemp("sdk") / "serve.log")


@pytest.fixture
async def jobq(service: Service, db: asyncpg.Connection) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(service.url, retry=RetryPolicy(max_retries=2)) as client:
        yield client


async def test_a_running_handler_sees_cancellation_and_stops(
    jobq: AsyncClient, db: asyncpg.Connection
) -> None:
    worker = Worker(jobq, queues=["cancel"], concurrency=2, wait_seconds=1)
    started = asyncio.Event()
    seen_after: list[float] = []
    requested_at: list[float] = []
    thread_seen: list[bool] = []

    @worker.handler("render")
    async def render(job: Job) -> str:
        started.set()
        while not job.cancel_requested:
            await asyncio.sleep(0.05)
        seen_after.append(time.monotonic() - requested_at[0])
        raise JobCancelled()

    @worker.handler("export")
    def export(job: Job) -> str:
        while not job.cancel_requested:
            time.sleep(0.05)
        thread_seen.append(True)
        return "stopped early"  # a handler may also return: the job then succeeds

    # A 3 s lease: heartbeats every second bring the news.
    rendering = await jobq.enqueue("cancel", "render", lease_seconds=3, max_attempts=5)
    exporting = await jobq.enqueue("cancel", "export", lease_seconds=3)
    task = asyncio.create_task(worker.run_async())
    try:
        await asyncio.wait_for(started.wait(), timeout=15)

        async def both_running() -> bool:
            page = await jobq.list_jobs(queue="cancel", state="running")
            return len(page.jobs) == 2

        await eventually(both_running)
        await asyncio.sleep(1.2)  # a heartbeat or two: nothing requested yet
        assert not seen_after and not thread_seen
        requested_at.append(time.monotonic())
        assert (await jobq.cancel_job(rendering.id)).state == "running"
        assert (await jobq.cancel_job(exporting.id)).state == "running"

        async def finished(job_id: int) -> JobRecord | None:
            job = await jobq.get_job(job_id)
            return job if job.state != "running" else None

        cancelled = await eventually(lambda: finished(rendering.id), timeout=10)
        stopped = await eventually(lambda: finished(exporting.id), timeout=10)
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)
    assert seen_after and seen_after[0] < 3, "seen within a couple of heartbeats (one a second)"
    assert thread_seen == [True]
    # A job whose cancellation was requested is not retried: it ends cancelled.
    assert cancelled.state == "cancelled" and cancelled.attempt == 1
    assert cancelled.last_error is not None and cancelled.last_error.type == "JobCancelled"
    assert (stopped.state, stopped.result) == ("succeeded", "stopped early")
