"""The Python SDK's `Worker` cancels a handler that runs past its job's `timeout_seconds`:
cooperatively first (an async handler gets `CancelledError`, a thread sees
`job.timed_out`), then by abandoning it; the slot is free again and the service records
the attempt as `timeout`."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from jobq_client import AsyncClient, Job, JobRecord, RetryPolicy, Worker
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


async def test_a_handler_past_its_timeout_is_cancelled_then_abandoned(
    jobq: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobq_client.worker")
    worker = Worker(
        jobq, queues=["timeouts"], concurrency=1, wait_seconds=1, timeout_grace_seconds=0.5
    )
    cancelled: list[float] = []
    thread_saw: list[bool] = []
    leased: dict[str, float] = {}

    @worker.handler("hang")
    async def hang(job: Job) -> str:
        leased["hang"] = time.monotonic()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(time.monotonic() - leased["hang"])
            raise
        return "never"

    @worker.handler("stuck")
    def stuck(job: Job) -> str:
        leased["stuck"] = time.monotonic()
        while not job.timed_out:  # it sees the timeout, but goes on a while (abandoned)
            time.sleep(0.02)
        thread_saw.append(True)
        time.sleep(3)
        return "too late"

    @worker.handler("quick")
    async def quick(job: Job) -> str:
        leased["quick"] = time.monotonic()
        return "ok"

    # One slot: each runs once the one before is cancelled or abandoned.
    hung = await jobq.enqueue("timeouts", "hang", priority=3, timeout_seconds=1, max_attempts=1)
    stuck_job = await jobq.enqueue(
        "timeouts", "stuck", priority=2, timeout_seconds=1, max_attempts=1
    )
    quick_job = await jobq.enqueue("timeouts", "quick", priority=1)
    task = asyncio.create_task(worker.run_async())
    try:

        async def done(job_id: int) -> JobRecord | None:
            job = await jobq.get_job(job_id)
            return job if job.finished else None

        assert (await eventually(lambda: done(quick_job.id), timeout=20)).state == "succeeded"
        # the async handler was cancelled at its timeout
        assert len(cancelled) == 1 and 0.9 <= cancelled[0] <= 2.5
        # the thread saw it, and was abandoned after the grace period: its slot went on
        assert thread_saw == [True]
        assert 1.0 <= leased["quick"] - leased["stuck"] <= 3.0
        # the service's reaper (every 5 s) failed both attempts as `timeout`
        for job_id in (hung.id, stuck_job.id):
            record = await eventually(functools.partial(done, job_id), timeout=20)
            assert record.state == "failed"
            assert record.last_error is not None and record.last_error.type == "timeout"
            assert [a.outcome for a in record.attempts] == ["timeout"]
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)
    events = [getattr(r, "event", None) for r in caplog.records]
    assert events.count("job.timed_out") == 2
