"""Test a handler without a jobq service: run it on a job you describe, see its outcome.

    from jobq_client.testing import run
    from myapp.tasks import worker

    def test_resize_halves_the_width() -> None:
        outcome = run(worker, "resize", {"width": 100})
        assert outcome.state == "succeeded" and outcome.result == {"width": 50}
        assert outcome.progress == [(50.0, "resize", None)]

The handler runs as the worker would run it (an async one on an event loop, a plain
function in a thread), and its outcome is judged by the worker's rules: a return value
completes the job (it must be JSON), an exception fails the attempt (`Permanent` for
good, `Retry(after=...)` with a delay).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from jobq_client._job import Job
from jobq_client._models import ErrorInfo, JobRecord, Lease, Parent
from jobq_client._worker import Worker, _failure

__all__ = ["Outcome", "run"]


@dataclass
class Outcome:
    """How the handler ended, and the progress it reported as (percent, stage, message)."""

    state: Literal["succeeded", "failed"]
    result: Any = None
    error: ErrorInfo | None = None
    retryable: bool = False
    retry_after_seconds: float | None = None
    progress: list[tuple[float | None, str | None, str | None]] = field(default_factory=list)


class _Recorder:
    """Stands in for the worker's session: records progress, answers cancellation."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cancel_requested: bool) -> None:
        self.loop = loop
        self.cancel_requested = cancel_requested
        self.beats: list[tuple[float | None, str | None, str | None]] = []

    async def beat(
        self,
        job: Job,
        *,
        percent: float | None = None,
        stage: str | None = None,
        message: str | None = None,
    ) -> None:
        self.beats.append((percent, stage, message))
        if self.cancel_requested:
            job._cancel_requested = True


def _lease(
    type: str, payload: Any, queue: str, attempt: int, max_attempts: int, parents: Sequence[Parent]
) -> Lease:
    now = datetime.now(UTC)
    record = JobRecord(
        id=1, queue=queue, type=type, state="running", priority=0, payload=payload,
        attempt=attempt, max_attempts=max_attempts, lease_seconds=60, run_at=now,
        created_at=now, updated_at=now, started_at=now, worker_id="test",
        lease_expires_at=now + timedelta(seconds=60),
    )  # fmt: skip
    return Lease("1-test", now + timedelta(seconds=60), record, list(parents))


def run(
    worker: Worker,
    type: str,
    payload: Any = None,
    *,
    queue: str = "test",
    attempt: int = 1,
    max_attempts: int = 5,
    cancel_requested: bool = False,
    parents: Sequence[Parent] = (),
) -> Outcome:
    """Run `worker`'s handler for `type` on a job with `payload`; its outcome."""
    handler = worker.handlers[type]

    async def main() -> Outcome:
        recorder = _Recorder(asyncio.get_running_loop(), cancel_requested)
        job = Job(_lease(type, payload, queue, attempt, max_attempts, parents), recorder)
        job._cancel_requested = cancel_requested
        try:
            if asyncio.iscoroutinefunction(handler):
                result = await handler(job)
            else:
                result = await asyncio.to_thread(handler, job)
        except Exception as exc:
            error_type, message, details, retryable, retry_after = _failure(exc)
            return Outcome(
                "failed",
                error=ErrorInfo(error_type, message, details),
                retryable=retryable and attempt < max_attempts,
                retry_after_seconds=retry_after,
                progress=recorder.beats,
            )
        json.dumps(result, allow_nan=False)  # a result the service could not store raises
        return Outcome("succeeded", result=result, progress=recorder.beats)

    return asyncio.run(main())
