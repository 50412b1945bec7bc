"""The SDK workers' `Snooze`: a handler puts its job back for later, spending no attempt;
past the service's cap the attempt fails instead."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from jobq_client import AsyncClient, Job, JobRecord, RetryPolicy, Snooze, Worker
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


async def test_a_handler_snoozes_three_times_then_succeeds_on_its_first_attempt(
    jobq: AsyncClient,
) -> None:
    worker = Worker(jobq, queues=["snooze"], concurrency=1, wait_seconds=1)
    runs: list[int] = []

    @worker.handler("poll")
    async def poll(job: Job) -> str:
        runs.append(job.attempt)
        if len(runs) <= 3:
            raise Snooze(0.2)
        return "ready"

    job = await jobq.enqueue("snooze", "poll", max_attempts=1)
    task = asyncio.create_task(worker.run_async())
    try:

        async def done() -> JobRecord | None:
            record = await jobq.get_job(job.id)
            return record if record.finished else None

        finished = await eventually(done, timeout=20)
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)
    assert finished.state == "succeeded" and finished.result == "ready"
    assert runs == [1, 1, 1, 1] and finished.attempt == 1 and finished.snoozes == 3
    assert [a.outcome for a in finished.attempts] == ["snoozed"] * 3 + ["succeeded"]
