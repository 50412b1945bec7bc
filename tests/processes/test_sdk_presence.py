"""The Python SDK's `Worker` seen by a real `jobq serve`: listed while idle with its SDK,
version, queues, types and host; gone once stopped, then pruned; quieted through the
API, it finishes the job it holds and leases no more until resumed."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

import jobq_client
from jobq_client import AsyncClient, Job, RetryPolicy, Worker, WorkerInfo
from jobq_client._worker import SDK_VERSION
from tests.sdk_support import Service, eventually, running, running_service

# The SDK's logic against a service, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")

FAST_RETRY = RetryPolicy(max_retries=3, backoff_seconds=0.05, max_backoff_seconds=0.2)
QUICK = {
    "JOBQ_WORKER_FLUSH_SECONDS": "0.2",
    "JOBQ_WORKER_GONE_SECONDS": "1",
    "JOBQ_WORKER_RETAIN_SECONDS": "3",
    "JOBQ_PRUNE_INTERVAL_SECONDS": "0.5",
}


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    log = tmp_path_factory.mktemp("presence") / "serve.log"
    yield from running_service(database_url, log, **QUICK)


@pytest.fixture
async def jobq(service: Service, db: asyncpg.Connection) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(service.url, retry=FAST_RETRY) as client:
        yield client


async def _listed(jobq: AsyncClient, worker_id: str) -> WorkerInfo | None:
    found = [w for w in await jobq.list_workers() if w.worker_id == worker_id]
    return found[0] if found else None


def test_the_worker_names_the_sdk_version_it_ships_with() -> None:
    assert jobq_client.__version__ == SDK_VERSION


async def test_an_idle_worker_is_listed_then_gone_then_pruned(
    jobq: AsyncClient, service: Service, db: asyncpg.Connection
) -> None:
    worker = Worker(jobq, queues=["idle"], worker_id="idle-1", wait_seconds=0.2,
                    presence_seconds=0.3)  # fmt: skip
    worker.handler("resize")(lambda job: None)
    async with running(worker):
        shown = await eventually(lambda: _listed(jobq, "idle-1"))
        assert (shown.sdk, shown.version) == ("jobq-client-python", jobq_client.__version__)
        assert (shown.queues, shown.types) == (["idle"], ["resize"])
        assert shown.host == socket.gethostname()
        assert shown.status == "live" and shown.running == 0 and not shown.quiet

    async def gone() -> WorkerInfo | None:
        found = await _listed(jobq, "idle-1")
        return found if found is not None and found.status == "gone" else None

    await eventually(gone, timeout=10)

    async def pruned() -> bool:
        left = await db.fetchval("SELECT count(*) FROM jobq.workers WHERE worker_id = 'idle-1'")
        return left == 0 and await _listed(jobq, "idle-1") is None

    await eventually(pruned, timeout=15)


async def test_a_quiet_worker_finishes_its_job_and_leases_no_more_until_resumed(
    jobq: AsyncClient,
) -> None:
    release = asyncio.Event()
    started: list[int] = []
    worker = Worker(jobq, queues=["quiet"], worker_id="quiet-1", concurrency=1,
                    wait_seconds=0.2, presence_seconds=0.3, lease_seconds=3)  # fmt: skip

    @worker.handler("work")
    async def work(job: Job) -> str:
        started.append(job.id)
        if len(started) == 1:
            await release.wait()  # outlives its lease: only heartbeats keep it
        return "done"

    first = await jobq.enqueue("quiet", "work")
    async with running(worker):
        await eventually(lambda: asyncio.sleep(0, started == [first.id] or None))
        await eventually(lambda: _listed(jobq, "quiet-1"))  # as an admin would see it
        assert await jobq.quiet_worker("quiet-1") is True
        second = await jobq.enqueue("quiet", "work")
        await asyncio.sleep(4)  # past its lease: heartbeats go on while quiet
        release.set()
        done = await jobq.wait(first.id, timeout=10)
        assert done.state == "succeeded" and done.attempt == 1
        await asyncio.sleep(1.5)  # several lease calls' worth
        assert started == [first.id]
        assert (await jobq.get_job(second.id)).state == "queued"
        shown = await _listed(jobq, "quiet-1")
        assert shown is not None and shown.quiet and shown.status == "live"
        assert await jobq.resume_worker("quiet-1") is False
        assert (await jobq.wait(second.id, timeout=10)).state == "succeeded"
    assert started == [first.id, second.id]
