"""The job state machine as the API sees it: enqueue, lease, heartbeat, finish.

Limits an operator tunes are checked here; every state change is one statement in
the repository. When a lease transition matches no row, the job's recorded history
says why: never issued (404), superseded or finished differently (409), or a repeat
of the same finishing call (200, same outcome).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from app.core.config import Settings
from app.core.errors import (
    Conflict,
    JobNotFound,
    JobqError,
    LeaseForbidden,
    LeaseLost,
    LeaseNotFound,
    PayloadTooLarge,
    QueueFull,
    ValidationFailed,
)
from app.db.repository import Backoff, JobsRepository, Row
from app.schemas import AckComplete, AckFail, CompleteIn, FailIn, HeartbeatIn, JobIn, LeaseIn
from app.service import payloads, telemetry
from app.service.leases import format_token, parse_token
from app.service.wakeups import Wakeups

ENQUEUE_RACE_RETRIES = 3
Outcome = Literal["complete", "fail"]
_OUTCOME_RECORD = {"complete": "succeeded", "fail": "failed"}
# FINISH's array parameters, and FINISH_ONE's scalar parameter each is made of.
_ACK_ARRAYS = {
    "job_ids": "job_id",
    "lease_ids": "lease_id",
    "outcomes": "outcome",
    "results": "result",
    "errors": "error",
    "retryable": "retryable",
    "retry_after": "retry_after",
}
# ENQUEUE_MANY's array parameters, and the single-job parameter each is made of.
_BATCH_ARRAYS = {
    "types": "type",
    "payloads": "payload",
    "priorities": "priority",
    "run_ats": "run_at",
    "delays": "delay_seconds",
    "max_attempts": "max_attempts",
    "lease_seconds": "lease_seconds",
    "idempotency_keys": "idempotency_key",
    "metadatas": "metadata",
}


@dataclass(frozen=True, slots=True)
class Lease:
    token: str
    expires_at: datetime
    job: Row


@dataclass(frozen=True, slots=True)
class Heartbeat:
    token: str
    expires_at: datetime
    cancel_requested: bool
    progress_recorded: bool


@dataclass(frozen=True, slots=True)
class Finished:
    """One finishing call's answer: the job as it now is, or why the call was refused."""

    token: str
    job: Row | None
    error: JobqError | None


# Not `getattr(ack, name, default)`: a pydantic model answers a missing attribute by
# raising inside `__getattr__`, which cost 5 % of a drain's CPU.
def _retryable(ack: AckComplete | AckFail) -> bool:
    return ack.retryable if isinstance(ack, AckFail) else True


def _retry_after(ack: AckComplete | AckFail) -> float | None:
    return ack.retry_after_seconds if isinstance(ack, AckFail) else None


def backoff_from(settings: Settings) -> Backoff:
    return Backoff(
        base_seconds=settings.backoff_base_seconds,
        cap_seconds=settings.backoff_cap_seconds,
        jitter=settings.backoff_jitter,
    )


def explain_stale(
    job: Row | None, lease: UUID, outcome: Outcome | None, key_id: int | None = None
) -> JobqError | None:
    """Why a lease matched no running job: None means "a repeat of what already happened".

    A lease taken with another API key than `key_id` is refused whatever became of it,
    and says nothing about the job.
    """
    if job is None:
        return LeaseNotFound("no lease with this id was ever issued")
    record = next((a for a in reversed(job["attempts"]) if a.get("lease_id") == str(lease)), None)
    if record is None and str(job["lease_id"]) != str(lease):
        return LeaseNotFound("no lease with this id was ever issued")
    owner = record.get("key_id") if record is not None else job["lease_key_id"]
    if key_id is not None and owner != key_id:
        return LeaseForbidden("this lease was taken with another API key")
    if record is not None and outcome is not None and record["outcome"] == _OUTCOME_RECORD[outcome]:
        return None
    ended = f"ended as {record['outcome']}" if record is not None else "is no longer running"
    return LeaseLost(
        f"this lease {ended}; the job is now {job['state']}",
        job_id=job["id"],
        state=job["state"],
    )


class JobService:
    """Enqueue, lease and finish jobs within the configured limits."""

    def __init__(self, repo: JobsRepository, settings: Settings, wakeups: Wakeups) -> None:
        self._repo = repo
        self._settings = settings
        self._backoff = backoff_from(settings)
        self._wakeups = wakeups

    # ---- producers ---------------------------------------------------------------

    def _lease_seconds(self, value: int | None, loc: tuple[str | int, ...]) -> int | None:
        limit = self._settings.max_lease_seconds
        if value is not None and value > limit:
            raise ValidationFailed.field(loc, f"must be at most {limit} seconds", "less_than_equal")
        return value

    def _insert_params(self, job: JobIn, loc: tuple[str | int, ...]) -> dict[str, Any]:
        limit = self._settings.max_payload_bytes
        depth = self._settings.max_json_depth
        return {
            "type": job.type,
            "payload": payloads.encode(
                job.payload, field=(*loc, "payload"), max_bytes=limit, max_depth=depth
            ),
            "priority": job.priority,
            "run_at": job.run_at,
            "delay_seconds": job.delay_seconds or 0.0,
            "max_attempts": job.max_attempts or self._settings.default_max_attempts,
            "lease_seconds": self._lease_seconds(job.lease_seconds, (*loc, "lease_seconds"))
            or self._settings.default_lease_seconds,
            "idempotency_key": job.idempotency_key,
            "metadata": payloads.encode(
                job.metadata, field=(*loc, "metadata"), max_bytes=limit, max_depth=depth
            ),
        }

    async def enqueue(self, queue: str, job: JobIn, idempotency_key: str | None) -> Row:
        """Create a job, or return the one already holding the same idempotency key."""
        if idempotency_key is not None:
            if job.idempotency_key not in (None, idempotency_key):
                raise ValidationFailed.field(
                    ("body", "idempotency_key"),
                    "differs from the Idempotency-Key header",
                    "value_error",
                )
            job = job.model_copy(update={"idempotency_key": idempotency_key})
        params = {"queue": queue, **self._insert_params(job, ("body",))}
        for _ in range(ENQUEUE_RACE_RETRIES):
            row = await self._repo.enqueue_one(params)
            if row is not None and row["id"] is not None:
                telemetry.enqueued(queue, [row])
                return row
            if row is not None and row["refused_max_backlog"] is not None:
                raise self._queue_full(queue, row["refused_max_backlog"], row["refused_backlog"])
            # The job holding the key was committed after this statement's snapshot, or
            # deleted by retention in between: go again.
        raise Conflict("the idempotency key is changing hands too fast; retry the request")

    async def enqueue_batch(self, queue: str, jobs: Sequence[JobIn]) -> list[Row]:
        """Create many jobs in one round trip; the answer is in request order."""
        limit = self._settings.max_enqueue_batch
        if len(jobs) > limit:
            raise ValidationFailed.field(
                ("body", "jobs"), f"at most {limit} jobs per batch", "too_long"
            )
        params = [self._insert_params(job, ("body", "jobs", i)) for i, job in enumerate(jobs)]
        answers: list[Row | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))
        for _ in range(ENQUEUE_RACE_RETRIES):
            columns = {
                array: [params[i][field] for i in pending] for array, field in _BATCH_ARRAYS.items()
            }
            rows = await self._repo.enqueue_many(queue, columns)
            if rows and rows[0]["refused_max_backlog"] is not None:
                first = rows[0]
                raise self._queue_full(
                    queue,
                    first["refused_max_backlog"],
                    first["refused_backlog"],
                    new_jobs=first["refused_new_jobs"],
                )
            telemetry.enqueued(queue, [row for row in rows if row["id"] is not None])
            for index, row in zip(pending, rows, strict=True):
                answers[index] = row if row["id"] is not None else None
            pending = [i for i in pending if answers[i] is None]
            if not pending:
                return [row for row in answers if row is not None]
        raise Conflict("the idempotency key is changing hands too fast; retry the request")

    def _queue_full(
        self, queue: str, max_backlog: int, backlog: int, *, new_jobs: int = 1
    ) -> QueueFull:
        backlog = min(backlog, max_backlog)  # each state is counted up to max_backlog
        if backlog >= max_backlog:
            detail = (
                f"queue {queue!r} already holds its max_backlog of {max_backlog} unfinished jobs"
            )
        else:
            detail = (
                f"the batch's {new_jobs} new jobs do not fit in queue {queue!r}: it holds "
                f"{backlog} unfinished jobs and its max_backlog is {max_backlog}"
            )
        return QueueFull(
            detail,
            retry_after_seconds=self._settings.queue_full_retry_after_seconds,
            queue=queue,
            max_backlog=max_backlog,
            backlog=backlog,
        )

    async def ping(self) -> None:
        """Raise `DatabaseUnavailable` unless the database answers."""
        await self._repo.ping()

    async def get(self, job_id: int) -> Row:
        job = await self._repo.get(job_id)
        if job is None:
            raise JobNotFound(f"no job has id {job_id}", job_id=job_id)
        return job

    async def list_jobs(
        self,
        *,
        queue: str | None,
        state: str | None,
        type_: str | None,
        after: int,
        limit: int,
        allowed: tuple[list[str], list[str]] | None = None,
    ) -> Sequence[Row]:
        """`allowed`: only these queues (names, LIKE patterns), for a key limited to some."""
        return await self._repo.list(
            queue=queue, state=state, type_=type_, after=after, limit=limit, allowed=allowed
        )

    # ---- workers -----------------------------------------------------------------

    async def lease(
        self,
        request: LeaseIn,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
        key_id: int | None = None,
    ) -> list[Lease]:
        """Hand up to `max_jobs` due jobs to one worker, best priority first.

        With `wait_seconds`, an empty answer waits (holding no database connection) until
        a job is announced in one of the queues or time runs out. A caller that went away
        meanwhile (`abandoned`) is not handed jobs it could never receive. The leases are
        bound to `key_id`: only that API key may heartbeat or finish them.
        """
        limit = self._settings.max_lease_batch
        if request.max_jobs > limit:
            raise ValidationFailed.field(
                ("body", "max_jobs"), f"must be at most {limit}", "less_than_equal"
            )
        queues = list(dict.fromkeys(request.queues))
        claim = functools.partial(
            self._repo.lease,
            queues=queues,
            types=list(dict.fromkeys(request.types)),
            max_jobs=request.max_jobs,
            lease_seconds=self._lease_seconds(request.lease_seconds, ("body", "lease_seconds")),
            worker_id=request.worker_id,
            key_id=key_id,
        )
        deadline = time.monotonic() + request.wait_seconds
        with self._wakeups.waiter(queues, typed=bool(request.types)) as waiter:
            while True:
                waiter.reset()
                rows = await claim()
                left = deadline - time.monotonic()
                if rows or left <= 0 or self._wakeups.closed:
                    break
                await self._wakeups.wait(waiter, left)
                if abandoned is not None and await abandoned():
                    return []
        telemetry.leased(rows)
        rows = sorted(rows, key=lambda r: (-r["priority"], r["run_at"], r["id"]))
        return [Lease(format_token(r["id"], r["lease_id"]), r["lease_expires_at"], r) for r in rows]

    async def heartbeat(
        self, token: str, request: HeartbeatIn, key_id: int | None = None
    ) -> Heartbeat:
        """Extend a live lease from now and record progress."""
        job_id, lease = parse_token(token)
        progress = request.progress
        row = await self._repo.heartbeat(
            {
                "job_id": job_id,
                "lease_id": lease,
                "extend_seconds": self._lease_seconds(
                    request.extend_seconds, ("body", "extend_seconds")
                ),
                "has_progress": progress is not None,
                "percent": progress.percent if progress else None,
                "stage": progress.stage if progress else None,
                "message": progress.message if progress else None,
                "min_interval": self._settings.heartbeat_min_interval_seconds,
                "key_id": key_id,
            }
        )
        if row is not None:
            return Heartbeat(
                token,
                row["lease_expires_at"],
                row["cancel_requested"],
                progress_recorded=row["written"] and progress is not None,
            )
        error = explain_stale(await self._repo.get(job_id), lease, None, key_id)
        assert error is not None
        raise error

    # The single calls are acks of one. Their bodies were validated on the way in (the
    # token by the route's path bounds), so the acks are built without validating again.

    async def complete(self, token: str, request: CompleteIn, key_id: int | None = None) -> Row:
        ack = AckComplete.model_construct(lease_id=token, outcome="complete", **dict(request))
        return self._one(await self._finish([ack], key_id, whole=True))

    async def fail(self, token: str, request: FailIn, key_id: int | None = None) -> Row:
        ack = AckFail.model_construct(lease_id=token, outcome="fail", **dict(request))
        return self._one(await self._finish([ack], key_id, whole=True))

    @staticmethod
    def _one(results: list[Finished]) -> Row:
        (result,) = results
        if result.error is not None:
            raise result.error
        assert result.job is not None
        return result.job

    def _ack_params(
        self, loc: tuple[str | int, ...], ack: AckComplete | AckFail
    ) -> tuple[Any, Any]:
        """The ack's result and error as jsonb text; raises if either is too large or deep."""
        limit = self._settings.max_payload_bytes
        depth = self._settings.max_json_depth
        if isinstance(ack, AckComplete):
            result = payloads.encode(
                ack.result, field=(*loc, "result"), max_bytes=limit, max_depth=depth
            )
            return result, None
        payloads.check_depth(ack.error.details, field=(*loc, "error", "details"), max_depth=depth)
        error = {
            "type": ack.error.type,
            "message": payloads.truncate_utf8(
                ack.error.message, self._settings.max_error_message_bytes
            ),
            "details": ack.error.details,
        }
        return None, payloads.encode(error, field=(*loc, "error"), max_bytes=limit)

    async def finish(
        self, acks: Sequence[AckComplete | AckFail], key_id: int | None = None
    ) -> list[Finished]:
        """Complete or fail many leases in one round trip; one answer per ack, in order.

        Only leases taken with `key_id` are finished (None: any, authentication is off).
        """
        limit = self._settings.max_ack_batch
        if len(acks) > limit:
            raise ValidationFailed.field(("body", "acks"), f"at most {limit} acks", "too_long")
        return await self._finish(acks, key_id, whole=False)

    async def _finish(
        self, acks: Sequence[AckComplete | AckFail], key_id: int | None, *, whole: bool
    ) -> list[Finished]:
        """`whole`: the single call's one ack, answered with the whole job (its errors
        name the body's fields); else a batch, answered with brief rows.

        An ack that was not applied is answered with its job read whole, to explain why.
        """
        # An ack's own fault (a token never issued, a result or error too large or too
        # deep) is its answer alone, as for the single call, and it is not sent. Each
        # other lease goes to the database once; a repeat in the batch is judged after.
        keys: dict[int, tuple[int, UUID]] = {}
        refused: dict[int, JobqError] = {}
        first: dict[tuple[int, UUID], dict[str, Any]] = {}  # each lease's ack to send
        sent: list[int] = []
        for index, ack in enumerate(acks):
            try:
                key = parse_token(ack.lease_id)
                loc = ("body",) if whole else ("body", "acks", index)
                result, error = self._ack_params(loc, ack)
            except (LeaseNotFound, PayloadTooLarge, ValidationFailed) as exc:
                refused[index] = exc
                continue
            keys[index] = key
            if key not in first:
                first[key] = {
                    "job_id": key[0],
                    "lease_id": key[1],
                    "outcome": ack.outcome,
                    "result": result,
                    "error": error,
                    "retryable": _retryable(ack),
                    "retry_after": _retry_after(ack),
                }
                sent.append(index)
        if not sent:  # every ack refused on its own: nothing to ask the database
            return [Finished(ack.lease_id, None, refused[i]) for i, ack in enumerate(acks)]
        if whole:
            (one,) = first.values()
            row = await self._repo.finish_one(one, self._backoff, key_id)
            rows = [row] if row is not None else []
        else:
            params = first.values()
            columns = {array: [p[field] for p in params] for array, field in _ACK_ARRAYS.items()}
            rows = await self._repo.finish(columns, self._backoff, key_id)
        applied = {sent[row["ord"] - 1] for row in rows}
        telemetry.finished(rows, [acks[sent[row["ord"] - 1]].outcome for row in rows])
        latest: dict[int, Row] = {row["id"]: row for row in rows}
        # Explaining an ack not applied (a repeat in the batch too) takes the whole job.
        unexplained = {keys[i][0] for i in keys if i not in applied}
        if unexplained:
            for row in await self._repo.get_many(sorted(unexplained)):
                latest[row["id"]] = row
        answers = []
        for index, ack in enumerate(acks):
            if index in refused:
                answers.append(Finished(ack.lease_id, None, refused[index]))
                continue
            job_id, lease = keys[index]
            job = latest.get(job_id)
            error = None if index in applied else explain_stale(job, lease, ack.outcome, key_id)
            answers.append(Finished(ack.lease_id, job, error))
        return answers
