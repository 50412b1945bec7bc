"""Workers: snooze a leased job, putting it back for later without spending an attempt."""

from __future__ import annotations

from app.core.config import Settings
from app.core.errors import JobqError, SnoozeLimitReached
from app.jobs.limits import LimitedQueues
from app.jobs.params import SnoozeParams
from app.jobs.repository import JobsRepository
from app.jobs.rows import JobRow
from app.jobs.service.stale import explain_stale, may_hold
from app.jobs.tokens import parse_token


class Snoozes:
    """Put leased jobs back to the queue for later, up to `max_snoozes` times a job."""

    def __init__(self, repo: JobsRepository, settings: Settings, limited: LimitedQueues) -> None:
        self._repo = repo
        self._max = settings.max_snoozes
        self._limited = limited

    async def snooze(self, token: str, seconds: float, key_id: int | None = None) -> JobRow:
        """The job, queued again `seconds` from now with its attempt count as it was before
        this lease (or `cancelled`, if that was asked for meanwhile)."""
        job_id, lease = parse_token(token)
        job = await self._repo.snooze(SnoozeParams(job_id, lease, seconds, self._max, key_id))
        if job is not None:
            if job.queue in await self._limited.slots():
                await self._repo.announce_slots([job.queue])  # its slot is free
            return job
        raise self._refusal(await self._repo.get(job_id), token, key_id)

    def _refusal(self, job: JobRow | None, token: str, key_id: int | None) -> JobqError:
        """Why a snooze matched nothing: the job's cap, or its lease (see `stale`)."""
        _, lease = parse_token(token)
        if (
            job is not None
            and job.state == "running"
            and str(job.lease_id) == str(lease)
            and may_hold(job.lease_key_id, key_id)
            and job.snoozes >= self._max
        ):
            return SnoozeLimitReached(
                f"job {job.id} has snoozed {job.snoozes} times, the most allowed "
                "(JOBQ_MAX_SNOOZES); complete or fail it",
                job_id=job.id,
                snoozes=job.snoozes,
            )
        error = explain_stale(job, lease, None, key_id)
        assert error is not None  # no outcome: never "a repeat"
        return error
