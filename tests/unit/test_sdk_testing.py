"""`jobq_client.testing` runs a handler without a service, judged by the worker's rules;
`Retry(after=...)` and `Permanent` say how a failure is retried."""

from __future__ import annotations

import time

from jobq_client import Job, JobCancelled, Parent, Permanent, Retry, Worker
from jobq_client.testing import run

worker = Worker(queues=["images"])


@worker.handler("resize")
async def resize(job: Job) -> dict[str, int]:
    await job.progress(50, stage="resize")
    return {"width": job.payload["width"] // 2}


@worker.handler("sync_resize")
def sync_resize(job: Job) -> dict[str, int]:
    job.progress_sync(10, message="thread")
    time.sleep(0.01)
    return {"width": job.payload["width"] // 2}


@worker.handler("flaky")
async def flaky(job: Job) -> None:
    if job.attempt < 3:
        raise Retry("provider busy", after=30)


@worker.handler("doomed")
async def doomed(job: Job) -> None:
    raise Permanent("no such image")


@worker.handler("long")
async def long(job: Job) -> str:
    await job.progress(1)
    job.raise_if_cancelled()
    return "done"


@worker.handler("merge")
async def merge(job: Job) -> int:
    return sum(p.result for p in job.parents)


def test_a_handler_runs_without_a_service() -> None:
    done = run(worker, "resize", {"width": 100})
    assert (done.state, done.result, done.progress) == (
        "succeeded",
        {"width": 50},
        [(50, "resize", None)],
    )
    threaded = run(worker, "sync_resize", {"width": 10})
    assert (threaded.result, threaded.progress) == ({"width": 5}, [(10, None, "thread")])


def test_retry_after_and_permanent_failures() -> None:
    busy = run(worker, "flaky", attempt=1)
    assert busy.state == "failed" and busy.error is not None
    assert (busy.error.type, busy.error.message) == ("Retry", "provider busy")
    assert (busy.retryable, busy.retry_after_seconds) == (True, 30.0)
    assert run(worker, "flaky", attempt=3).state == "succeeded"
    last = run(worker, "flaky", attempt=2, max_attempts=2)
    assert not last.retryable  # its attempts are used up
    gone = run(worker, "doomed")
    assert gone.error is not None and gone.error.type == "Permanent" and not gone.retryable


def test_cancellation_and_parents() -> None:
    cancelled = run(worker, "long", cancel_requested=True)
    assert cancelled.error is not None and cancelled.error.type == JobCancelled.__name__
    assert run(worker, "long").result == "done"
    parents = [Parent(1, "count", "succeeded", 2), Parent(2, "count", "succeeded", 3)]
    assert run(worker, "merge", parents=parents).result == 5
