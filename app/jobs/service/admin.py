"""What an operator does to one job: cancel, retry, delete.

Every action is one statement whose `WHERE` holds the states it may start from, so it
never races a worker. When it matches nothing, the job as it then is says why: it does
not exist (404), or its state forbids the action (409). A job that moved into an
allowed state in between (a retry racing a cancel, say) is simply tried again.

Cancelling is cooperative for running jobs: the job is flagged (`cancel_requested`),
its worker sees the flag on its next heartbeat, and the job is not retried any more —
a failure, or its lease expiring, ends it `cancelled` (as Oban and River do); completing
it still makes it `succeeded`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from app.core.errors import (
    Conflict,
    JobFinished,
    JobNotFound,
    JobNotRetryable,
    JobqError,
    JobRunning,
    ParentEnded,
)
from app.jobs.repository import JobsRepository
from app.jobs.rows import JobRow

TRANSITION_RACE_RETRIES = 3

T = TypeVar("T")

CANCELLABLE = frozenset({"queued", "running"})
RETRYABLE = frozenset({"failed", "cancelled"})
DELETABLE = frozenset({"queued", "succeeded", "failed", "cancelled"})  # all but running


class JobAdmin:
    """Operator actions on single jobs."""

    def __init__(self, repo: JobsRepository) -> None:
        self._repo = repo

    async def _transition(
        self,
        job_id: int,
        apply: Callable[[], Awaitable[T | None]],
        allowed: frozenset[str],
        refuse: Callable[[JobRow], T | JobqError],
    ) -> T:
        """Apply a transition; on a miss, answer from the job (`refuse`) or try again."""
        for _ in range(TRANSITION_RACE_RETRIES):
            done = await apply()
            if done is not None:
                return done
            job = await self._repo.get(job_id)
            if job is None:
                raise JobNotFound(f"no job has id {job_id}", job_id=job_id)
            if job.state not in allowed:
                answer = refuse(job)
                if isinstance(answer, JobqError):
                    raise answer
                return answer
            # The job moved into a state the action accepts after the statement ran.
        raise Conflict(f"job {job_id} is changing state too fast; retry the request")

    async def cancel(self, job_id: int) -> JobRow:
        """Cancel a queued job now, or ask a running one's worker to stop."""

        def refuse(job: JobRow) -> JobRow | JobqError:
            if job.state == "cancelled":
                return job  # a repeated cancel: already done
            return JobFinished(f"job {job_id} already {job.state}", job_id=job_id, state=job.state)

        return await self._transition(
            job_id, lambda: self._repo.cancel(job_id), CANCELLABLE, refuse
        )

    async def retry(
        self, job_id: int, *, reset_attempts: bool = False, run_at: datetime | None = None
    ) -> JobRow:
        """Send a failed or cancelled job back to the queue; its history is kept. A job
        that waits for a parent that ended for good (or is gone) is refused: it would
        wait forever."""

        async def apply() -> JobRow | None:
            retried = await self._repo.retry(job_id, reset_attempts=reset_attempts, run_at=run_at)
            if retried is None:
                blocked = await self._repo.blocking_parent(job_id)
                if blocked is not None:
                    raise ParentEnded(
                        f"{blocked}: retry that job instead (its dependents follow)",
                        job_id=job_id,
                    )
            return retried

        def refuse(job: JobRow) -> JobqError:
            return JobNotRetryable(
                f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried",
                job_id=job_id,
                state=job.state,
            )

        return await self._transition(job_id, apply, RETRYABLE, refuse)

    async def delete(self, job_id: int) -> None:
        """Delete a job that is not running."""

        async def apply() -> bool | None:
            return True if await self._repo.delete(job_id) else None

        def refuse(job: JobRow) -> JobqError:
            return JobRunning(
                f"job {job_id} is running; cancel it first", job_id=job_id, state=job.state
            )

        await self._transition(job_id, apply, DELETABLE, refuse)
