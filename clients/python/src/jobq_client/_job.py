"""`Job`, a leased job as its handler sees it, and the exceptions a handler raises to
say how its attempt ends (`Permanent`, `Retry`, `Snooze`, `JobCancelled`)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Protocol

from jobq_client._models import JobRecord, Lease, Parent


class Heartbeats(Protocol):
    """What a `Job` reports its progress to: the worker's session, or a test's fake."""

    loop: asyncio.AbstractEventLoop

    async def beat(
        self,
        job: Job,
        *,
        percent: float | None = None,
        stage: str | None = None,
        message: str | None = None,
    ) -> None: ...


class Permanent(Exception):
    """Raise from a handler to fail the job for good: it is not retried."""

    retryable = False


class Retry(Exception):
    """Raise from a handler to fail this attempt and run the job again `after` seconds
    from now (instead of the queue's backoff), while it has attempts left.

        raise Retry(after=30, message="rate limited by the provider")
    """

    retryable = True

    def __init__(self, message: str = "", *, after: float) -> None:
        super().__init__(message or f"retry in {after:g}s")
        self.retry_after_seconds = float(after)


class Snooze(Exception):
    """Raise from a handler to run the job again `seconds` from now without spending an
    attempt (the job's `attempt` is as before this run). The service allows a job
    `JOBQ_MAX_SNOOZES` snoozes (25); past that the worker fails the attempt instead.

        raise Snooze(60)  # the report is not ready yet
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"snooze for {seconds:g}s")
        self.seconds = float(seconds)


class JobCancelled(Permanent):
    """Raise from a handler that saw `job.cancel_requested`: the job fails for good."""

    def __init__(self, message: str = "cancellation was requested") -> None:
        super().__init__(message)


class Job:
    """A leased job, as its handler sees it.

    @worker.handler("resize")
    async def resize(job: Job) -> dict[str, Any]:
        for step in range(10):
            if job.cancel_requested:
                raise JobCancelled()
            await job.progress(step * 10, stage="resize")
        return {"ok": True}
    """

    def __init__(self, lease: Lease, session: Heartbeats) -> None:
        self.lease_id = lease.lease_id
        self.expires_at: datetime = lease.expires_at
        self.record: JobRecord = lease.job
        self.parents: list[Parent] = lease.parents  # the jobs it depended on, with results
        self._session = session
        self._cancel_requested = lease.job.cancel_requested
        self.timeout_at: datetime | None = lease.timeout_at
        self._timed_out = False
        self.lease_lost = False
        self.released = False
        self._next_beat = 0.0
        self._deadline: float | None = None  # the loop's time of its timeout

    @property
    def id(self) -> int:
        return self.record.id

    @property
    def queue(self) -> str:
        return self.record.queue

    @property
    def type(self) -> str:
        return self.record.type

    @property
    def payload(self) -> Any:
        return self.record.payload

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, ..."""
        return self.record.attempt

    @property
    def max_attempts(self) -> int:
        return self.record.max_attempts

    @property
    def priority(self) -> int:
        return self.record.priority

    @property
    def metadata(self) -> dict[str, Any]:
        return self.record.metadata

    @property
    def cancel_requested(self) -> bool:
        """Whether someone asked for this job to be cancelled (updated by each heartbeat)."""
        return self._cancel_requested

    @property
    def timed_out(self) -> bool:
        """Whether this attempt ran past the job's `timeout_seconds` (the service has
        failed it as `timeout`): stop working on it. An async handler is also cancelled."""
        return self._timed_out

    def raise_if_cancelled(self) -> None:
        """Raise `JobCancelled` when cancellation was requested, or the attempt timed out."""
        if self._timed_out:
            raise JobCancelled("the attempt ran past the job's timeout")
        if self._cancel_requested:
            raise JobCancelled()

    async def progress(
        self, percent: float | None = None, *, stage: str | None = None, message: str | None = None
    ) -> None:
        """Report progress now (it also extends the lease), visible in `GET /v1/jobs/{id}`.

        Raises `LeaseLost` if the job is no longer this worker's: stop working on it.
        """
        await self._session.beat(self, percent=percent, stage=stage, message=message)

    def progress_sync(
        self, percent: float | None = None, *, stage: str | None = None, message: str | None = None
    ) -> None:
        """`progress` for handlers that are plain functions (they run in a thread)."""
        loop = self._session.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("in an async handler, use `await job.progress(...)`")
        future = asyncio.run_coroutine_threadsafe(
            self.progress(percent, stage=stage, message=message), loop
        )
        future.result()

    def __repr__(self) -> str:
        return f"Job(id={self.id}, type={self.type!r}, attempt={self.attempt})"
