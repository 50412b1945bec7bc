"""The Python SDK's `Worker` against a real `jobq serve`: handlers succeed, fail and are
retried, report progress, outlive their lease by heartbeating, and a `jobq worker`
process drains on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from jobq_client import (
    AsyncClient,
    Job,
    JobRecord,
    Permanent,
    Retry,
    RetryPolicy,
    Unauthorized,
    Worker,
)
from tests.sdk_support import (
    REPO,
    Proxy,
    Respond,
    Service,
    clean_env,
    eventually,
    problem,
    running,
    running_service,
    stop_process,
)

# The SDK's logic against a service, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")

FAST_RETRY = RetryPolicy(max_retries=3, backoff_seconds=0.05, max_backoff_seconds=0.2)


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from running_service(database_url, tmp_path_factory.mktemp("sdk") / "serve.log")


@pytest.fixture
async def jobq(service: Service, db: asyncpg.Connection) -> AsyncIterator[AsyncClient]:
    """A client of the (emptied) service."""
    async with AsyncClient(service.url, retry=FAST_RETRY) as client:
        yield client


async def settled(jobq: AsyncClient, job_id: int, timeout: float = 15.0) -> JobRecord:
    """The job once it succeeded or failed for good."""

    async def probe() -> JobRecord | None:
        job = await jobq.get_job(job_id)
        return job if job.state in ("succeeded", "failed", "cancelled") else None

    return await eventually(probe, timeout=timeout)


async def test_async_and_sync_handlers_complete_their_jobs(jobq: AsyncClient) -> None:
    worker = Worker(jobq, queues=["math"], concurrency=2, wait_seconds=1, worker_id="py-1")
    threads: list[str] = []

    @worker.handler("add")
    async def add(job: Job) -> dict[str, Any]:
        return {"sum": job.payload["a"] + job.payload["b"], "attempt": job.attempt}

    @worker.handler("mul")
    def mul(job: Job) -> int:
        threads.append(threading.current_thread().name)
        return int(job.payload["a"] * job.payload["b"])

    other = await jobq.enqueue("math", "div", {"a": 1, "b": 0})  # no handler: never leased
    added = await jobq.enqueue("math", "add", {"a": 2, "b": 3})
    multiplied = await jobq.enqueue("math", "mul", {"a": 4, "b": 5})
    async with running(worker):
        done = [await settled(jobq, added.id), await settled(jobq, multiplied.id)]
    assert [(j.state, j.result, j.attempt) for j in done] == [
        ("succeeded", {"sum": 5, "attempt": 1}, 1),
        ("succeeded", 20, 1),
    ]
    assert {j.attempts[0].worker_id for j in done} == {"py-1"}
    assert threads == [f"jobq-job-{multiplied.id}"], "a plain function runs in its own thread"
    untouched = await jobq.get_job(other.id)
    assert (untouched.state, untouched.attempt) == ("queued", 0)


async def test_an_exception_fails_the_attempt_and_the_job_is_retried(jobq: AsyncClient) -> None:
    worker = Worker(jobq, queues=["flaky"], concurrency=2, wait_seconds=1)

    @worker.handler("flaky")
    async def flaky(job: Job) -> str:
        if job.attempt < 3:
            raise ConnectionError(f"upstream down on attempt {job.attempt}")
        return "third time lucky"

    @worker.handler("doomed")
    def doomed(job: Job) -> None:
        raise Permanent("this input can never work")

    retried = await jobq.enqueue("flaky", "flaky")
    hopeless = await jobq.enqueue("flaky", "doomed", max_attempts=5)
    async with running(worker):
        lucky = await settled(jobq, retried.id)
        failed = await settled(jobq, hopeless.id)
    assert (lucky.state, lucky.attempt, lucky.result) == ("succeeded", 3, "third time lucky")
    assert [a.outcome for a in lucky.attempts] == ["failed", "failed", "succeeded"]
    first_error = lucky.attempts[0].error
    assert first_error is not None
    assert (first_error.type, first_error.message) == (
        "ConnectionError",
        "upstream down on attempt 1",
    )
    frames = first_error.details["traceback"].splitlines()
    assert frames[0] == "Traceback (most recent call last):"
    assert frames[1].startswith(f'  File "{__file__}"') and frames[1].endswith("in flaky")
    assert "jobq_client" not in "\n".join(frames)  # the SDK's frames that called it
    assert (failed.state, failed.attempt) == ("failed", 1), "Permanent is not retried"
    assert failed.last_error is not None and failed.last_error.type == "Permanent"
    sync_frames = failed.last_error.details["traceback"].splitlines()  # run in a thread
    assert sync_frames[1].startswith(f'  File "{__file__}"') and sync_frames[1].endswith(
        "in doomed"
    )


async def test_retry_after_sets_the_next_run_and_each_run_is_logged_with_its_duration(
    jobq: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(jobq, queues=["later"], concurrency=1, wait_seconds=1)

    @worker.handler("busy")
    async def busy(job: Job) -> str:
        if job.attempt == 1:
            raise Retry("provider busy", after=1)
        return "done"

    created = await jobq.enqueue("later", "busy")
    with caplog.at_level(logging.INFO, logger="jobq_client.worker"):
        async with running(worker):
            done = await settled(jobq, created.id, timeout=20)
    assert (done.state, done.attempt) == ("succeeded", 2)
    first, second = done.attempts
    assert first.finished_at is not None and second.started_at is not None
    assert (second.started_at - first.finished_at).total_seconds() >= 0.9  # after=1, not 0
    runs = [r for r in caplog.records if getattr(r, "event", "").startswith("job.")]
    assert [r.event for r in runs] == ["job.failed", "job.finished"]  # type: ignore[attr-defined]
    assert all(r.fields["job_id"] == created.id for r in runs)  # type: ignore[attr-defined]
    assert all(r.fields["duration_ms"] >= 0 for r in runs)  # type: ignore[attr-defined]
    assert runs[1].getMessage().startswith(f"job {created.id} (busy) succeeded in ")


async def test_a_result_the_service_refuses_fails_the_job_for_good(jobq: AsyncClient) -> None:
    worker = Worker(jobq, queues=["refused"], concurrency=3, wait_seconds=1)

    @worker.handler("huge")
    async def huge(job: Job) -> str:
        return "x" * (256 * 1024)  # over the payload limit: 413 for this ack alone

    @worker.handler("deep")
    async def deep(job: Job) -> Any:
        value: Any = 1
        for _ in range(40):  # deeper than the service's 32 levels: 422
            value = [value]
        return value

    @worker.handler("fine")
    async def fine(job: Job) -> str:
        return "ok"

    jobs = [await jobq.enqueue("refused", kind) for kind in ("huge", "deep", "fine")]
    async with running(worker):
        done = [await settled(jobq, job.id) for job in jobs]
    assert [(j.state, j.attempt) for j in done] == [("failed", 1), ("failed", 1), ("succeeded", 1)]
    assert [j.last_error.type if j.last_error else None for j in done] == [
        "PayloadTooLarge",
        "ValidationError",
        None,
    ]


async def test_progress_is_visible_through_the_api_while_the_handler_runs(
    jobq: AsyncClient,
) -> None:
    worker = Worker(jobq, queues=["progress"], concurrency=2, wait_seconds=1)
    release = asyncio.Event()
    thread_release = threading.Event()

    @worker.handler("resize")
    async def resize(job: Job) -> str:
        await job.progress(40, stage="resize", message="half way")
        await release.wait()
        return "done"

    @worker.handler("hash")
    def hash_(job: Job) -> str:
        job.progress_sync(75, stage="hash")
        thread_release.wait(timeout=30)
        return "hashed"

    resized = await jobq.enqueue("progress", "resize")
    hashed = await jobq.enqueue("progress", "hash")

    async def progress_of(job_id: int) -> tuple[Any, ...] | None:
        job = await jobq.get_job(job_id)
        if job.progress is None:
            return None
        return (job.state, job.progress.percent, job.progress.stage, job.progress.message)

    async with running(worker):
        assert await eventually(lambda: progress_of(resized.id)) == (
            "running", 40, "resize", "half way",
        )  # fmt: skip
        assert await eventually(lambda: progress_of(hashed.id)) == ("running", 75, "hash", None)
        release.set()
        thread_release.set()
        assert (await settled(jobq, resized.id)).result == "done"
        final = await settled(jobq, hashed.id)
    assert final.progress is not None and final.progress.percent == 75


async def test_heartbeats_keep_a_job_alive_past_its_lease(
    jobq: AsyncClient, db: asyncpg.Connection
) -> None:
    """A 1 s lease, a 3 s handler: it succeeds on its first attempt. Meanwhile a job
    leased with no heartbeat on the same service is reaped, so the reaper was at work."""
    worker = Worker(jobq, queues=["long"], concurrency=1, wait_seconds=1)

    @worker.handler("slow")
    def slow(job: Job) -> str:
        time.sleep(3)
        return "outlived the lease"

    long_job = await jobq.enqueue("long", "slow", lease_seconds=1)
    silent = await jobq.enqueue("silent", "t", lease_seconds=1)
    await jobq.lease(["silent"], worker_id="gone-quiet")
    started = time.monotonic()
    async with running(worker):
        done = await settled(jobq, long_job.id)
    assert time.monotonic() - started >= 3
    assert (done.state, done.attempt, done.result) == ("succeeded", 1, "outlived the lease")
    assert [a.outcome for a in done.attempts] == ["succeeded"]
    reaped = await jobq.get_job(silent.id)
    assert [a.outcome for a in reaped.attempts] == ["lease_expired"]


async def test_leases_in_batches_and_acknowledges_in_batches(
    service: Service, jobq: AsyncClient
) -> None:
    proxy = Proxy(service.url)
    try:
        async with AsyncClient(proxy.url, retry=FAST_RETRY) as through_proxy:
            worker = Worker(through_proxy, queues=["bulk"], concurrency=8, wait_seconds=1)
            gate = asyncio.Event()

            @worker.handler("t")
            async def handle(job: Job) -> int:
                await gate.wait()
                return int(job.payload)

            created = [await jobq.enqueue("bulk", "t", i) for i in range(8)]
            async with running(worker):
                await eventually(lambda: _running_count(jobq, "bulk", 8))
                gate.set()
                done = [await settled(jobq, job.id) for job in created]
        assert [job.result for job in done] == list(range(8))
    finally:
        proxy.close()
    leases = [json.loads(s.body) for s in proxy.seen if s.path == "/v1/leases"]
    assert leases[0]["max_jobs"] == 8 and leases[0]["types"] == ["t"]
    acks = [json.loads(s.body)["acks"] for s in proxy.seen if s.path == "/v1/acks"]
    assert sum(len(batch) for batch in acks) == 8
    assert len(acks) < 8, f"acks were not batched: {[len(b) for b in acks]}"
    assert not [s for s in proxy.seen if s.path.endswith("/complete")]


async def test_a_full_worker_acks_with_the_lease_of_its_next_jobs(
    service: Service, jobq: AsyncClient, db: asyncpg.Connection
) -> None:
    """On a queue of `max_running` 2 worked by a worker of concurrency 2, the slot a
    finished job frees is taken again by its ack's call (complete-and-lease)."""
    await db.execute("INSERT INTO jobq.queues (name, max_running) VALUES ('limited-sdk', 2)")
    proxy = Proxy(service.url)
    try:
        async with AsyncClient(proxy.url, retry=FAST_RETRY) as through_proxy:
            worker = Worker(through_proxy, queues=["limited-sdk"], concurrency=2, wait_seconds=1)

            @worker.handler("t")
            async def handle(job: Job) -> int:
                await asyncio.sleep(0.02)
                return int(job.payload)

            created = [await jobq.enqueue("limited-sdk", "t", i) for i in range(12)]
            async with running(worker):
                done = [await settled(jobq, job.id) for job in created]
        assert [job.result for job in done] == list(range(12))
    finally:
        proxy.close()
    calls = [json.loads(s.body) for s in proxy.seen if s.path == "/v1/acks"]
    with_lease = [call for call in calls if "lease" in call]
    assert with_lease, "no ack carried a lease"
    assert {call["lease"]["max_jobs"] for call in with_lease} <= {1, 2}
    assert with_lease[0]["lease"]["queues"] == ["limited-sdk"]
    assert sum(len(call["acks"]) for call in calls) == 12


async def _running_count(jobq: AsyncClient, queue: str, count: int) -> bool:
    page = await jobq.list_jobs(queue=queue, state="running")
    return len(page.jobs) == count


# ---- `jobq worker` as a process: SIGTERM ------------------------------------------------


def start_worker_process(target: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "worker", target, "--url", url],
            cwd=REPO,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


async def test_sigterm_drains_running_jobs_and_leases_no_more(
    jobq: AsyncClient, service: Service, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    created = [await jobq.enqueue("drain", "nap", {"seconds": 2.5}) for _ in range(6)]
    process = start_worker_process("tests.sdk_tasks:worker", service.url, log)
    try:
        await eventually(lambda: _running_count(jobq, "drain", 3), timeout=20)
        in_flight = {j.id for j in (await jobq.list_jobs(queue="drain", state="running")).jobs}
        code = await asyncio.to_thread(stop_process, process, signal.SIGTERM)
    finally:
        if process.poll() is None:
            stop_process(process, signal.SIGKILL)
    output = log.read_text()
    assert code == 0, output
    jobs = {job.id: job for job in [await jobq.get_job(j.id) for j in created]}
    assert not [j for j in jobs.values() if j.state == "running"], output
    assert {i for i, j in jobs.items() if j.state == "succeeded"} == in_flight, output
    assert all(jobs[i].attempt == 1 and jobs[i].result["attempt"] == 1 for i in in_flight)
    rest = [j for i, j in jobs.items() if i not in in_flight]
    assert [(j.state, j.attempt) for j in rest] == [("queued", 0)] * 3, output
    assert "stopping, no more leases" in output


async def test_sigterm_releases_jobs_still_running_after_the_grace_period(
    jobq: AsyncClient, service: Service, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    in_thread = await jobq.enqueue("release", "nap", {"seconds": 60})
    on_loop = await jobq.enqueue("release", "async-nap", {"seconds": 60})
    process = start_worker_process("tests.sdk_tasks:impatient", service.url, log)
    try:
        await eventually(lambda: _running_count(jobq, "release", 2), timeout=20)
        signalled = time.monotonic()
        code = await asyncio.to_thread(stop_process, process, signal.SIGTERM)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            stop_process(process, signal.SIGKILL)
    output = log.read_text()
    assert code == 0, output
    assert took < 10, f"a 0.5 s grace period took {took:.1f} s:\n{output}"
    for created in (in_thread, on_loop):
        job = await jobq.get_job(created.id)
        assert (job.state, job.attempt) == ("queued", 1), output
        assert job.last_error is not None and job.last_error.type == "WorkerShutdown"
        assert job.run_at <= datetime.now(UTC), "released with no backoff"


def readme_worker() -> str:
    """The ```python block right after the docs' `<!-- python-worker -->` line."""
    lines = (REPO / "docs" / "workers" / "python.md").read_text().splitlines()
    start = lines.index("<!-- python-worker -->")
    assert lines[start + 1] == "```python"
    end = lines.index("```", start + 2)
    return "\n".join(lines[start + 2 : end]) + "\n"


async def test_the_readme_worker_in_ten_lines_runs(
    jobq: AsyncClient, service: Service, tmp_path: Path
) -> None:
    source = readme_worker()
    assert len([line for line in source.splitlines() if line.strip()]) <= 10
    (tmp_path / "tasks.py").write_text(source)
    created = await jobq.enqueue("images", "resize", {"width": 1920, "height": 1080})
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "tasks:worker"],
            cwd=tmp_path,  # `jobq worker` imports from the current directory
            env=clean_env(JOBQ_URL=service.url, PYTHONPATH=str(REPO)),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        job = await settled(jobq, created.id, timeout=30)
    finally:
        code = await asyncio.to_thread(stop_process, process, signal.SIGTERM)
    assert code == 0, log.read_text()
    assert (job.state, job.result) == ("succeeded", {"width": 960, "height": 540})
    assert job.progress is not None and job.progress.stage == "resize"


def test_jobq_worker_explains_a_bad_target(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "worker", "tests.sdk_tasks:nothing_here"],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "tests.sdk_tasks has no attribute nothing_here" in result.stderr


async def test_a_refused_lease_stops_the_worker_with_the_typed_error(
    service: Service, jobq: AsyncClient
) -> None:
    proxy = Proxy(service.url)
    proxy.plan = [Respond(401, problem(401, "unauthorized", "a valid API key is needed"))]
    try:
        async with AsyncClient(proxy.url, api_key="revoked", retry=FAST_RETRY) as client:
            worker = Worker(client, queues=["q"], wait_seconds=1)
            worker.handler("t")(lambda job: None)
            with pytest.raises(Unauthorized, match="a valid API key is needed"):
                await asyncio.wait_for(worker.run_async(), timeout=30)
    finally:
        proxy.close()
    assert [seen.path for seen in proxy.seen] == ["/v1/leases"], "not retried"
