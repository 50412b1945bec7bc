"""Jobs that depend on others: enqueued through the SQL functions (`jobq.enqueue`,
`jobq.enqueue_many`), which count the parents still to finish and record the edges in
the producer's transaction (checked again at its commit); what a parent's end does to
its dependents is the database's trigger's business (migrations 0010, 0021). A caller
names only parents in queues its key may use: any other is refused as a missing one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.core.config import Settings
from app.core.errors import JobqError, PayloadTooLarge, QueueFull, ValidationFailed
from app.jobs import telemetry
from app.jobs.params import NewJob
from app.jobs.repository import Allowed, FunctionRefused, JobsRepository
from app.jobs.rows import BatchItem, Enqueued
from app.jobs.service import checks
from app.jobs.service.specs import ItemRef, JobSpec


def _parents(job: JobSpec) -> list[int]:
    return [p for p in job.depends_on or [] if not isinstance(p, ItemRef)]


def _item(job: JobSpec) -> dict[str, Any]:
    """`job` as an item of `jobq.enqueue_many`'s `jobs` (what it leaves out is None)."""
    item: dict[str, Any] = {}
    for name, value in zip(JobSpec._fields, job, strict=True):
        if value is None:
            continue
        if name in ("run_at", "start_by"):
            value = value.isoformat()
        elif name == "depends_on":
            value = [{"ref": p.ref} if isinstance(p, ItemRef) else p for p in value]
        elif name == "unique":
            value = value.options()
        elif name == "trace":
            value = {k: v for k, v in value._asdict().items() if v is not None}
        item[name] = value
    return item


def refused(error: FunctionRefused, settings: Settings, queue: str) -> JobqError:
    """The error the API answers for a refusal of the SQL function."""
    if error.status == 429:
        return QueueFull(
            error.message,
            retry_after_seconds=settings.queue_full_retry_after_seconds,
            queue=queue,
        )
    if error.status == 413:
        return PayloadTooLarge(error.message, limit_bytes=settings.max_payload_bytes)
    loc: checks.Loc = tuple(int(p) if p.isdigit() else p for p in error.field.split("."))
    return ValidationFailed.field(loc, error.message, "value_error")


class Workflows:
    """Enqueue jobs with dependencies, one or a whole graph in one batch."""

    def __init__(self, repo: JobsRepository, settings: Settings) -> None:
        self._repo = repo
        self._settings = settings

    async def one(self, queue: str, job: JobSpec, new: NewJob, allowed: Allowed) -> Enqueued:
        """`job` (already checked into `new`), waiting for its parents (of the
        `allowed` queues)."""
        for index, parent in enumerate(job.depends_on or []):
            if isinstance(parent, ItemRef):
                raise ValidationFailed.field(
                    ("depends_on", index),
                    "a ref names an item of the same batch: enqueue a batch for that",
                    "value_error",
                )
        try:
            job_id, deduplicated, replaced = await self._repo.enqueue_with_dependencies(
                queue, new, _parents(job), job.on_parent_failure, allowed
            )
        except FunctionRefused as error:
            raise refused(error, self._settings, queue) from None
        row = await self._repo.get(job_id)
        assert row is not None  # committed by the statement above, and not running
        if not deduplicated:
            telemetry.enqueued(queue, 1)
        return Enqueued(row, deduplicated, replaced)

    async def batch(self, queue: str, jobs: Sequence[JobSpec], allowed: Allowed) -> list[BatchItem]:
        """A batch whose items may depend on jobs (of the `allowed` queues) and on earlier
        items; in request order."""
        checks.at_most(
            sum(len(job.depends_on or ()) for job in jobs),
            self._settings.max_batch_dependencies,
            ("jobs",),
            "depends_on entries in all the batch's jobs",
        )
        items = []
        for index, job in enumerate(jobs):
            for p, parent in enumerate(job.depends_on or []):
                if isinstance(parent, ItemRef) and parent.ref >= index:
                    raise ValidationFailed.field(
                        ("jobs", index, "depends_on", p),
                        "a ref must name an earlier item of the batch",
                        "value_error",
                    )
            items.append(_item(job))
        try:
            created = await self._repo.enqueue_workflow(queue, json.dumps(items), allowed)
        except FunctionRefused as error:
            raise refused(error, self._settings, queue) from None
        telemetry.enqueued(queue, sum(1 for item in created if not item.deduplicated))
        return created
