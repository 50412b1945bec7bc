"""Producers: create jobs, one or a batch, within the queue's backlog and the limits."""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.core.config import Settings
from app.core.errors import Conflict, QueueFull
from app.jobs import payloads, telemetry
from app.jobs.params import Defaults, NewJob
from app.jobs.repository import Allowed, JobsRepository
from app.jobs.rows import BatchItem, Enqueued, Refused
from app.jobs.service import checks
from app.jobs.service.specs import JobSpec
from app.jobs.service.workflows import Workflows
from app.jobs.tracing import JobSpans

ENQUEUE_RACE_RETRIES = 3


class Enqueuer:
    """Enqueue jobs within the configured limits."""

    def __init__(self, repo: JobsRepository, settings: Settings) -> None:
        self._repo = repo
        self._settings = settings
        self._workflows = Workflows(repo, settings)
        self._defaults = Defaults(settings.default_max_attempts, settings.default_lease_seconds)
        self._spans = JobSpans(settings.opentelemetry)

    def _checked(self, job: JobSpec, loc: checks.Loc) -> NewJob:
        """`job` within this service's limits; errors name its fields after `loc`."""
        limit = self._settings.max_payload_bytes
        depth = self._settings.max_json_depth
        return NewJob(
            type=job.type,
            payload=payloads.encode(
                job.payload, field=(*loc, "payload"), max_bytes=limit, max_depth=depth
            ),
            priority=job.priority,
            run_at=job.run_at,
            delay_seconds=job.delay_seconds,
            max_attempts=job.max_attempts,
            lease_seconds=checks.lease_seconds(
                job.lease_seconds, self._settings.max_lease_seconds, (*loc, "lease_seconds")
            ),
            idempotency_key=job.idempotency_key,
            metadata=payloads.encode(
                job.metadata, field=(*loc, "metadata"), max_bytes=limit, max_depth=depth
            ),
            concurrency_key=job.concurrency_key,
            runs_on_parent_failure=job.on_parent_failure == "run",
            fairness_key=job.fairness_key,
            unique=None if job.unique is None else json.dumps(job.unique.options()),
            timeout_seconds=job.timeout_seconds,
            start_by=job.start_by,
            traceparent=None if job.trace is None else job.trace.traceparent,
            tracestate=None if job.trace is None else job.trace.tracestate,
        )

    async def one(self, queue: str, job: JobSpec, allowed: Allowed = None) -> Enqueued:
        """Create a job, or return the one already holding the same idempotency key; its
        parents must be in the `allowed` queues (the caller's key's; None: any)."""
        started = self._spans.start()
        found = await self._one(queue, job, allowed)
        self._spans.record("enqueue", started, queue, (found.job,))
        return found

    async def _one(self, queue: str, job: JobSpec, allowed: Allowed) -> Enqueued:
        new = self._checked(job, ())
        if job.depends_on:
            return await self._workflows.one(queue, job, new, allowed)
        for _ in range(ENQUEUE_RACE_RETRIES):
            found = await self._repo.enqueue_one(queue, new, self._defaults)
            if isinstance(found, Refused):
                raise self._queue_full(queue, found)
            if found is not None:
                if not found.deduplicated:
                    telemetry.enqueued(queue, 1)
                return found
            # Between the insert and the look at the job holding the key, it went
            # (retention, an operator): go again.
        raise Conflict(
            "the idempotency key or the queue's backlog is changing too fast; retry the request"
        )

    async def batch(
        self, queue: str, jobs: Sequence[JobSpec], allowed: Allowed = None
    ) -> list[BatchItem]:
        """Create many jobs in one round trip; the answer is in request order. The
        parents they name must be in the `allowed` queues (None: any)."""
        started = self._spans.start()
        items = await self._batch(queue, jobs, allowed)
        self._spans.record("enqueue", started, queue, (job.trace for job in jobs))
        return items

    async def _batch(
        self, queue: str, jobs: Sequence[JobSpec], allowed: Allowed
    ) -> list[BatchItem]:
        checks.at_most(len(jobs), self._settings.max_enqueue_batch, ("jobs",), "jobs per batch")
        new = [self._checked(job, ("jobs", i)) for i, job in enumerate(jobs)]
        if any(job.depends_on for job in jobs):
            return await self._workflows.batch(queue, jobs, allowed)
        answers: list[BatchItem | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))
        for _ in range(ENQUEUE_RACE_RETRIES):
            items = await self._repo.enqueue_many(queue, [new[i] for i in pending], self._defaults)
            if isinstance(items, Refused):
                raise self._queue_full(queue, items)
            telemetry.enqueued(
                queue, sum(1 for i in items if i.id is not None and not i.deduplicated)
            )
            for index, item in zip(pending, items, strict=True):
                answers[index] = item if item.id is not None else None
            pending = [i for i in pending if answers[i] is None]
            if not pending:
                return [item for item in answers if item is not None]
        raise Conflict("the idempotency key is changing hands too fast; retry the request")

    def _queue_full(self, queue: str, refused: Refused) -> QueueFull:
        max_backlog = refused.max_backlog
        backlog = min(refused.backlog, max_backlog)  # each state is counted up to max_backlog
        if backlog >= max_backlog:
            detail = (
                f"queue {queue!r} already holds its max_backlog of {max_backlog} unfinished jobs"
            )
        else:
            detail = (
                f"the batch's {refused.new_jobs} new jobs do not fit in queue {queue!r}: it holds "
                f"{backlog} unfinished jobs and its max_backlog is {max_backlog}"
            )
        return QueueFull(
            detail,
            retry_after_seconds=self._settings.queue_full_retry_after_seconds,
            queue=queue,
            max_backlog=max_backlog,
            backlog=backlog,
        )
