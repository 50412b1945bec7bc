"""Runs the queue core's named SQL (`enqueue.sql`, `lease.sql`, `finish.sql`, `jobs.sql`)
and hands back typed rows. Knows no rules."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import asyncpg

from app.core.config import DEFAULT_MAX_LEASE_BATCH
from app.core.errors import UniqueHeld
from app.core.retry import Backoff
from app.db.database import Database, fetch_in
from app.db.statement import NO_PARAMS, NoParams, P, Queries, Statement
from app.jobs.params import (
    AckColumns,
    AckParams,
    ByJobId,
    ByJobIds,
    ByQueue,
    ByQueues,
    CompleteManyParams,
    CompleteOneParams,
    Defaults,
    DependenciesOfParams,
    EnqueueManyParams,
    EnqueueOneParams,
    EnqueueWithDependenciesParams,
    EnqueueWorkflowParams,
    ExplainJobParams,
    FinishManyParams,
    FinishOneParams,
    HeartbeatParams,
    JobFilter,
    LeaseParams,
    LeaseQueueParams,
    ListJobsParams,
    NewJob,
    ParentsOfParams,
    RecordEnqueueLimitsParams,
    RecordLeasedTypesParams,
    ReleaseParams,
    RetryJobParams,
    SnoozeParams,
)
from app.jobs.rows import (
    BatchItem,
    Beat,
    Dependency,
    Enqueued,
    ExplainRow,
    FinishedBrief,
    JobRow,
    LimitedState,
    Parent,
    Refused,
    job_at,
    many,
)

# The unique index of jobs' uniqueness (migration 0029): an operator's retry of a job
# whose uniqueness another job took meanwhile breaks it.
UNIQUE_INDEX = "jobs_unique_idx"

QUERIES = Queries(
    *(
        Path(__file__).with_name(f"{part}.sql")
        for part in ("enqueue", "lease", "finish", "jobs", "explain")
    )
)
ENQUEUE_ONE = QUERIES.bind("enqueue_one", EnqueueOneParams)
ENQUEUE_MANY = QUERIES.bind("enqueue_many", EnqueueManyParams)
LEASE = QUERIES.bind("lease", LeaseParams)
LEASE_QUEUE = QUERIES.bind("lease_queue", LeaseQueueParams)
LOCK_LIMITED_QUEUE = QUERIES.bind("lock_limited_queue", ByQueue)
LEASE_LIMITED = QUERIES.bind("lease_limited", LeaseQueueParams)
LEASE_FAIR = QUERIES.bind("lease_fair", LeaseQueueParams)
LIMITED_QUEUE_STATE = QUERIES.bind("limited_queue_state", ByQueue)
FAIR_QUEUE_STATE = QUERIES.bind("fair_queue_state", ByQueue)
LIMITED_QUEUES = QUERIES.bind("limited_queues", NoParams)
ANNOUNCE_SLOTS = QUERIES.bind("announce_slots", ByQueues)
NEXT_DUE = QUERIES.bind("next_due", ByQueues)
HEARTBEAT = QUERIES.bind("heartbeat", HeartbeatParams)
FINISH_ONE = QUERIES.bind("finish_one", FinishOneParams)
FINISH_MANY = QUERIES.bind("finish_many", FinishManyParams)
SNOOZE = QUERIES.bind("snooze", SnoozeParams)
COMPLETE_ONE = QUERIES.bind("complete_one", CompleteOneParams)
COMPLETE_MANY = QUERIES.bind("complete_many", CompleteManyParams)
RELEASE = QUERIES.bind("release", ReleaseParams)
GET_JOB = QUERIES.bind("get_job", ByJobId)
GET_JOBS = QUERIES.bind("get_jobs", ByJobIds)
LIST_JOBS = QUERIES.bind("list_jobs", ListJobsParams)
CANCEL_JOB = QUERIES.bind("cancel_job", ByJobId)
RETRY_JOB = QUERIES.bind("retry_job", RetryJobParams)
DELETE_JOB = QUERIES.bind("delete_job", ByJobId)
ENQUEUE_WITH_DEPENDENCIES = QUERIES.bind("enqueue_with_dependencies", EnqueueWithDependenciesParams)
ENQUEUE_WORKFLOW = QUERIES.bind("enqueue_workflow", EnqueueWorkflowParams)
PARENTS_OF = QUERIES.bind("parents_of", ParentsOfParams)
DEPENDENCIES_OF = QUERIES.bind("dependencies_of", DependenciesOfParams)
BLOCKING_PARENT = QUERIES.bind("blocking_parent", ByJobId)
WATCH_JOB = QUERIES.bind("watch_job", ByJobId)
RECORD_ENQUEUE_LIMITS = QUERIES.bind("record_enqueue_limits", RecordEnqueueLimitsParams)
RECORD_LEASED_TYPES = QUERIES.bind("record_leased_types", RecordLeasedTypesParams)
EXPLAIN_JOB = QUERIES.bind("explain_job", ExplainJobParams)


def _limited_state(record: asyncpg.Record) -> LimitedState:
    """The state in a record of limited_queue_state's or fair_queue_state's (which goes
    on with columns of its own)."""
    return LimitedState._make(record[: len(LimitedState._fields)])


# The queues a key may use: (exact names, LIKE patterns); None: every queue.
Allowed = tuple[list[str], list[str]] | None


def _allowed(allowed: Allowed) -> tuple[list[str] | None, list[str] | None]:
    """(names, patterns); (None, None): every queue."""
    return allowed if allowed is not None else (None, None)


def _retry_policy(backoff: Backoff) -> tuple[float, float, float]:
    """The `:backoff_base`, `:backoff_cap` and `:backoff_jitter` parameters, in order."""
    return backoff.base_seconds, backoff.cap_seconds, backoff.jitter


def lease_statement(max_jobs: int) -> Statement[LeaseQueueParams]:
    """The statement that leases `max_jobs` from one queue: `lease_queue`, its size
    written in (`numbered_lease`) when it is one a worker may ask for."""
    if 1 <= max_jobs <= DEFAULT_MAX_LEASE_BATCH:
        return numbered_lease(max_jobs)
    return LEASE_QUEUE


@functools.cache
def numbered_lease(max_jobs: int) -> Statement[LeaseQueueParams]:
    """`lease_queue` with its LIMIT written in as `max_jobs`. PostgreSQL plans a `$n`
    LIMIT for a tenth of the queue, and so plans every lease from a backlog afresh
    (docs/performance/postgres.md); with the number it keeps one plan. One statement per size asked
    (at most DEFAULT_MAX_LEASE_BATCH), prepared on the pooled connections that run it."""
    return LEASE_QUEUE.with_number("max_jobs", max_jobs)


# What the SQL enqueue functions raise, and the HTTP status each stands for.
_FUNCTION_REFUSALS = {"JQ422": 422, "JQ413": 413, "JQ429": 429}


class FunctionRefused(Exception):
    """The SQL enqueue function refused the job: `status` 422, 413 or 429, `field` the
    input it names (`depends_on`, `jobs.3.depends_on`, …)."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.message = message


class JobsRepository:
    """The jobs table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # ---- producers ---------------------------------------------------------------

    async def enqueue_one(
        self, queue: str, job: NewJob, defaults: Defaults
    ) -> Enqueued | Refused | None:
        """The job (new or holding the key), the refusal, or None: the job holding the
        key went between the insert and the look (try again)."""
        record = await self._db.fetch_one(ENQUEUE_ONE, EnqueueOneParams(queue, *job, *defaults))
        assert record is not None  # the statement answers one row a job
        if record["refused_max_backlog"] is not None:
            return Refused(record["refused_max_backlog"], record["refused_backlog"])
        if record["id"] is None:
            return None
        return Enqueued(job_at(record, 0), record["deduplicated"], record["replaced"])

    async def enqueue_many(
        self, queue: str, jobs: Sequence[NewJob], defaults: Defaults
    ) -> list[BatchItem] | Refused:
        """One item per job, in order; or the refusal of the whole batch."""
        if not jobs:
            return []
        columns = (list(column) for column in zip(*jobs, strict=True))  # NewJob's order
        params = EnqueueManyParams._make((queue, *columns, *defaults))
        records = await self._db.fetch(ENQUEUE_MANY, params)
        if records and records[0]["refused_max_backlog"] is not None:
            first = records[0]
            return Refused(
                first["refused_max_backlog"], first["refused_backlog"], first["refused_new_jobs"]
            )
        return [
            BatchItem(r["ord"], r["id"], r["state"], r["deduplicated"], r["replaced"])
            for r in records
        ]

    # ---- workers -------------------------------------------------------------------

    async def lease(
        self,
        queues: list[str],
        types: list[str],
        max_jobs: int,
        lease_seconds: int | None,
        worker_id: str,
        key_id: int | None = None,
    ) -> list[JobRow]:
        """Up to `max_jobs` due jobs of `queues` (not paused, nor limited), leased; from
        one queue by `lease_queue` (`lease_statement`), from several by `lease`."""
        if len(queues) == 1:
            one = LeaseQueueParams(queues[0], types, max_jobs, lease_seconds, worker_id, key_id)
            records = await self._db.fetch(lease_statement(max_jobs), one)
        else:
            several = LeaseParams(queues, types, max_jobs, lease_seconds, worker_id, key_id)
            records = await self._db.fetch(LEASE, several)
        return many(JobRow, records)

    async def lease_fair(
        self,
        queue: str,
        types: list[str],
        max_jobs: int,
        lease_seconds: int | None,
        worker_id: str,
        key_id: int | None = None,
    ) -> tuple[list[JobRow], LimitedState | None] | None:
        """`lease_limited` for a fair queue, in one call on its own (`lease_fair` takes
        the queue's row itself). None: the queue is not fair, or not limited (any more)."""
        params = LeaseQueueParams(queue, types, max_jobs, lease_seconds, worker_id, key_id)
        jobs = many(JobRow, await self._db.fetch(LEASE_FAIR, params))
        if len(jobs) == max_jobs:
            return jobs, None
        row = await self._db.fetch_one(FAIR_QUEUE_STATE, ByQueue(queue))
        if row is None or not row["fair"]:
            return None
        if row["paused"]:
            return jobs, None
        return jobs, _limited_state(row)

    async def lease_limited(
        self,
        queue: str,
        types: list[str],
        max_jobs: int,
        lease_seconds: int | None,
        worker_id: str,
        key_id: int | None = None,
    ) -> tuple[list[JobRow], LimitedState | None] | None:
        """Lease from one limited queue within its limits (a fair queue by taking turns
        across its fairness keys): the jobs, and what held the lease back when it got
        fewer than `max_jobs` (None: nothing did). None: the queue is not limited (any
        more). A paused queue gives nothing."""
        async with self._db.transaction() as conn:
            lock = await fetch_in(conn, LOCK_LIMITED_QUEUE, ByQueue(queue))
            if not lock:
                return None
            if lock[0]["paused"]:
                return [], None
            params = LeaseQueueParams(queue, types, max_jobs, lease_seconds, worker_id, key_id)
            fair = lock[0]["fair"]
            jobs = many(JobRow, await fetch_in(conn, LEASE_FAIR if fair else LEASE_LIMITED, params))
            state = None
            if len(jobs) < max_jobs:
                held = FAIR_QUEUE_STATE if fair else LIMITED_QUEUE_STATE
                (row,) = await fetch_in(conn, held, ByQueue(queue))
                state = _limited_state(row)
            return jobs, state

    async def limited_queues(self) -> dict[str, tuple[bool, bool]]:
        """The queues with a limit on running jobs or on their lease rate, or fair: each
        with whether it limits its running jobs (a finished job frees a slot), and
        whether it is fair."""
        records = await self._db.fetch(LIMITED_QUEUES, NO_PARAMS)
        return {record["name"]: (record["slots"], record["fair"]) for record in records}

    async def announce_slots(self, queues: list[str]) -> None:
        """Wake leases waiting on these limited queues: their running jobs ended."""
        await self._db.fetch(ANNOUNCE_SLOTS, ByQueues(queues))

    async def next_due(self, queues: list[str]) -> list[tuple[str, float]]:
        """Each queue's earliest due time still ahead (epoch seconds), where it has one."""
        records = await self._db.fetch(NEXT_DUE, ByQueues(queues))
        return [(record["queue"], float(record["due_epoch"])) for record in records]

    async def heartbeat(self, params: HeartbeatParams) -> Beat | None:
        """None when the lease is not live (or not this key's)."""
        record = await self._db.fetch_one(HEARTBEAT, params)
        if record is None:
            return None
        return Beat(record["written"], record["lease_expires_at"], record["cancel_requested"])

    async def release(self, params: ReleaseParams) -> bool:
        """Whether the lease was live, and its job is queued again."""
        return bool(await self._db.fetch(RELEASE, params))

    # A finish of completes alone runs complete_one / complete_many: the same fenced update
    # and answer without a fail's expressions, which PostgreSQL sets up on every execution.

    async def finish_one(
        self, ack: AckParams, backoff: Backoff, key_id: int | None = None
    ) -> JobRow | None:
        """The whole job, finished; None when the lease matched no live lease of this key."""
        if ack.outcome == "complete":
            complete = CompleteOneParams(ack.job_id, ack.lease_id, ack.result, key_id)
            record = await self._db.fetch_one(COMPLETE_ONE, complete)
        else:
            finish = FinishOneParams(*ack, *_retry_policy(backoff), key_id)
            record = await self._db.fetch_one(FINISH_ONE, finish)
        return None if record is None else job_at(record, 0)

    async def snooze(self, params: SnoozeParams) -> JobRow | None:
        """The whole job, snoozed; None when the lease matched no live lease of this key
        under its snooze cap."""
        record = await self._db.fetch_one(SNOOZE, params)
        return None if record is None else job_at(record, 0)

    async def finish_many(
        self, acks: AckColumns, backoff: Backoff, key_id: int | None = None
    ) -> list[FinishedBrief]:
        """The jobs finished, in brief (`ord` is the ack's 1-based place in `acks`)."""
        if acks.outcomes.count("complete") == len(acks.outcomes):
            complete = CompleteManyParams(acks.job_ids, acks.lease_ids, acks.results, key_id)
            records = await self._db.fetch(COMPLETE_MANY, complete)
        else:
            finish = FinishManyParams(*acks, *_retry_policy(backoff), key_id)
            records = await self._db.fetch(FINISH_MANY, finish)
        return many(FinishedBrief, records)

    # ---- readers -------------------------------------------------------------------

    async def get(self, job_id: int) -> JobRow | None:
        record = await self._db.fetch_one(GET_JOB, ByJobId(job_id))
        return None if record is None else JobRow._make(record)

    async def get_many(self, job_ids: list[int]) -> list[JobRow]:
        return [JobRow._make(r) for r in await self._db.fetch(GET_JOBS, ByJobIds(job_ids))]

    async def page(
        self, where: JobFilter, after: int, limit: int, allowed: Allowed = None
    ) -> list[JobRow]:
        """Up to `limit` jobs by id after `after`, of the `allowed` queues (None: any)."""
        params = ListJobsParams(*where, after, limit, *_allowed(allowed))
        return [JobRow._make(record) for record in await self._db.fetch(LIST_JOBS, params)]

    # ---- operators -----------------------------------------------------------------

    async def cancel(self, job_id: int) -> JobRow | None:
        """The job, cancelled or flagged; None when it is neither queued nor running."""
        record = await self._db.fetch_one(CANCEL_JOB, ByJobId(job_id))
        return None if record is None else JobRow._make(record)

    async def retry(
        self, job_id: int, *, reset_attempts: bool, run_at: datetime | None
    ) -> JobRow | None:
        """The job, queued again; None when it is neither failed nor cancelled."""
        params = RetryJobParams(job_id=job_id, reset_attempts=reset_attempts, run_at=run_at)
        try:
            record = await self._db.fetch_one(RETRY_JOB, params)
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name != UNIQUE_INDEX:
                raise
            raise UniqueHeld(job_id=job_id) from None
        return None if record is None else JobRow._make(record)

    async def delete(self, job_id: int) -> bool:
        """Whether the job was deleted (it existed and was not running)."""
        return await self._db.fetch_one(DELETE_JOB, ByJobId(job_id)) is not None

    async def explain(self, job_id: int, allowed: Allowed, max_ahead: int) -> ExplainRow | None:
        """The job's facts against its queue now; None: no such job."""
        params = ExplainJobParams(job_id, *_allowed(allowed), max_ahead)
        record = await self._db.fetch_one(EXPLAIN_JOB, params)
        return None if record is None else ExplainRow._make(record)

    # ---- dependencies and results ----------------------------------------------------

    async def _refusable(self, statement: Statement[P], params: P) -> list[asyncpg.Record]:
        try:
            return await self._db.fetch(statement, params)
        except asyncpg.PostgresError as exc:
            status = _FUNCTION_REFUSALS.get(exc.sqlstate or "")
            if status is None:
                raise
            field = getattr(exc, "detail", None) or ""
            raise FunctionRefused(status, field, str(getattr(exc, "message", exc))) from None

    async def enqueue_with_dependencies(
        self, queue: str, job: NewJob, parents: list[int], on_parent_failure: str, allowed: Allowed
    ) -> tuple[int, bool, bool]:
        """(the job's id, whether another job held its key or uniqueness, whether that
        one was replaced), its `parents` of the `allowed` queues; `FunctionRefused` if
        refused."""
        call = EnqueueWithDependenciesParams(
            queue, job.type, job.payload, job.priority, job.run_at, job.delay_seconds,
            job.max_attempts, job.lease_seconds, job.idempotency_key, job.metadata, parents,
            on_parent_failure, job.concurrency_key, job.timeout_seconds, job.start_by,
            *_allowed(allowed), job.fairness_key, job.unique, job.traceparent, job.tracestate,
        )  # fmt: skip
        (record,) = await self._refusable(ENQUEUE_WITH_DEPENDENCIES, call)
        return record["id"], record["deduplicated"], record["replaced"]

    async def enqueue_workflow(self, queue: str, jobs: str, allowed: Allowed) -> list[BatchItem]:
        """One item per job of the JSON array `jobs`, in order, its parents of the
        `allowed` queues; `FunctionRefused` if refused."""
        params = EnqueueWorkflowParams(queue, jobs, *_allowed(allowed))
        records = await self._refusable(ENQUEUE_WORKFLOW, params)
        return [
            BatchItem(r["ord"], r["id"], r["state"], r["deduplicated"], r["replaced"])
            for r in records
        ]

    async def parents_of(self, child_ids: list[int], allowed: Allowed) -> list[Parent]:
        """The children's parents in the `allowed` queues, with their results."""
        records = await self._db.fetch(PARENTS_OF, ParentsOfParams(child_ids, *_allowed(allowed)))
        return [Parent._make(record) for record in records]

    async def dependencies_of(self, job_id: int, allowed: Allowed) -> list[Dependency]:
        """The job's parents and children in the `allowed` queues."""
        params = DependenciesOfParams(job_id, *_allowed(allowed))
        records = await self._db.fetch(DEPENDENCIES_OF, params)
        return [Dependency._make(record) for record in records]

    async def blocking_parent(self, job_id: int) -> str | None:
        """Why the job cannot be retried for its parents; None when they allow it."""
        record = await self._db.fetch_one(BLOCKING_PARENT, ByJobId(job_id))
        return None if record is None else record["reason"]

    async def watch(self, job_id: int) -> None:
        """Ask the database to announce when this job finishes."""
        await self._db.fetch(WATCH_JOB, ByJobId(job_id))

    async def record_limits(self, limits: dict[str, int]) -> None:
        await self._db.fetch(RECORD_ENQUEUE_LIMITS, RecordEnqueueLimitsParams(**limits))

    async def record_leased_types(self, pairs: list[tuple[str, str]]) -> None:
        """Note that jobs of these (queue, type) pairs were leased just now."""
        queues, types = zip(*pairs, strict=True) if pairs else ((), ())
        params = RecordLeasedTypesParams(list(queues), list(types))
        await self._db.fetch(RECORD_LEASED_TYPES, params)
