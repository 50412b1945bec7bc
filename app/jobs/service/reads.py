"""Readers: a job, or a page of jobs."""

from __future__ import annotations

from app.core.errors import JobNotFound
from app.jobs.repository import JobsRepository
from app.jobs.rows import JobRow


class Reads:
    """Look at jobs."""

    def __init__(self, repo: JobsRepository) -> None:
        self._repo = repo

    async def get(self, job_id: int) -> JobRow:
        job = await self._repo.get(job_id)
        if job is None:
            raise JobNotFound(f"no job has id {job_id}", job_id=job_id)
        return job

    async def page(
        self,
        *,
        queue: str | None,
        state: str | None,
        type_: str | None,
        after: int,
        limit: int,
        allowed: tuple[list[str], list[str]] | None = None,
    ) -> list[JobRow]:
        """Jobs by id after `after`; `allowed`: only these queues (names, LIKE patterns), for
        a key limited to some."""
        return await self._repo.list(
            queue=queue, state=state, type_=type_, after=after, limit=limit, allowed=allowed
        )
