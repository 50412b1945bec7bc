"""Readers: a job (waiting for it to finish if asked), its dependencies, a page of jobs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from app.core.errors import JobNotFound
from app.jobs.finishes import Finishes
from app.jobs.params import JobFilter
from app.jobs.repository import Allowed, JobsRepository
from app.jobs.rows import Dependency, JobRow
from app.jobs.service.explain import MAX_AHEAD, Explanation, explain

FINISHED = frozenset({"succeeded", "failed", "cancelled"})


class Reads:
    """Look at jobs."""

    def __init__(self, repo: JobsRepository, finishes: Finishes) -> None:
        self._repo = repo
        self._finishes = finishes

    async def get(self, job_id: int) -> JobRow:
        job = await self._repo.get(job_id)
        if job is None:
            raise JobNotFound(f"no job has id {job_id}", job_id=job_id)
        return job

    async def wait(
        self,
        job_id: int,
        wait_seconds: float,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
    ) -> JobRow:
        """The job once it has finished (succeeded, failed or cancelled), or as it is when
        `wait_seconds` have passed; no database connection is held meanwhile."""
        job = await self.get(job_id)
        if job.state in FINISHED or wait_seconds <= 0:
            return job
        deadline = time.monotonic() + wait_seconds
        with self._finishes.waiter(job_id) as waiter:
            await self._repo.watch(job_id)  # from now on its finish is announced
            while True:
                waiter.reset()  # before looking: an announcement during the look is kept
                job = await self.get(job_id)
                left = deadline - time.monotonic()
                if job.state in FINISHED or left <= 0 or self._finishes.closed:
                    break
                if abandoned is not None and await abandoned():
                    break
                await self._finishes.wait(waiter, left)
        return job

    async def dependencies(self, job_id: int, allowed: Allowed = None) -> list[Dependency]:
        """The job's parents and children of the `allowed` queues (None: all);
        `JobNotFound` if there is no such job."""
        await self.get(job_id)
        return await self._repo.dependencies_of(job_id, allowed)

    async def explain(self, job_id: int, allowed: Allowed = None) -> Explanation:
        """Why the job is not running now (its parents of the `allowed` queues listed);
        `JobNotFound` if there is no such job."""
        facts = await self._repo.explain(job_id, allowed, MAX_AHEAD)
        if facts is None:
            raise JobNotFound(f"no job has id {job_id}", job_id=job_id)
        return explain(facts)

    async def page(
        self, where: JobFilter, after: int, limit: int, allowed: Allowed = None
    ) -> list[JobRow]:
        """Jobs by id after `after`; `allowed`: only these queues (names, LIKE patterns), for
        a key limited to some."""
        return await self._repo.page(where, after, limit, allowed)
