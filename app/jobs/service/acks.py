"""Workers: complete or fail leased jobs, one call per job or many acks in one call.

The single calls are acks of one. An ack that is not applied is explained from the
job's history (see `stale`); a repeat of the same finishing call is answered as the
first was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.core.config import Settings
from app.core.errors import JobqError, LeaseNotFound, PayloadTooLarge, ValidationFailed
from app.core.retry import Backoff
from app.jobs import payloads, telemetry
from app.jobs.limits import LimitedQueues
from app.jobs.repository import JobsRepository
from app.jobs.rows import FinishedBrief, JobRow
from app.jobs.schemas import AckComplete, AckFail, CompleteIn, FailIn
from app.jobs.service import checks
from app.jobs.service.stale import explain_stale
from app.jobs.tokens import parse_token

Ack = AckComplete | AckFail
# finish_many's array parameters, and finish_one's scalar parameter each is made of.
_ACK_ARRAYS = {
    "job_ids": "job_id",
    "lease_ids": "lease_id",
    "outcomes": "outcome",
    "results": "result",
    "errors": "error",
    "retryable": "retryable",
    "retry_after": "retry_after",
}


@dataclass(frozen=True, slots=True)
class Finished:
    """One ack's answer: the job as it now is (whole, or in brief in a batch), or why the
    ack was refused."""

    token: str
    job: JobRow | FinishedBrief | None
    error: JobqError | None


# Not `getattr(ack, name, default)`: a pydantic model answers a missing attribute by
# raising inside `__getattr__`, which cost 5 % of a drain's CPU.
def _retryable(ack: Ack) -> bool:
    return ack.retryable if isinstance(ack, AckFail) else True


def _retry_after(ack: Ack) -> float | None:
    return ack.retry_after_seconds if isinstance(ack, AckFail) else None


class Acks:
    """Complete or fail leases."""

    def __init__(self, repo: JobsRepository, settings: Settings, limited: LimitedQueues) -> None:
        self._repo = repo
        self._settings = settings
        self._backoff = Backoff.from_settings(settings)
        self._limited = limited

    # The single calls' bodies were validated on the way in (the token by the route's
    # path bounds), so their acks are built without validating again.

    async def complete(self, token: str, request: CompleteIn, key_id: int | None = None) -> JobRow:
        ack = AckComplete.model_construct(lease_id=token, outcome="complete", **dict(request))
        return self._one(await self._finish([ack], key_id, whole=True))

    async def fail(self, token: str, request: FailIn, key_id: int | None = None) -> JobRow:
        ack = AckFail.model_construct(lease_id=token, outcome="fail", **dict(request))
        return self._one(await self._finish([ack], key_id, whole=True))

    @staticmethod
    def _one(results: list[Finished]) -> JobRow:
        (result,) = results
        if result.error is not None:
            raise result.error
        assert isinstance(result.job, JobRow)  # a single call's answer is read whole
        return result.job

    async def finish(self, acks: Sequence[Ack], key_id: int | None = None) -> list[Finished]:
        """Complete or fail many leases in one round trip; one answer per ack, in order.

        Only leases taken with `key_id` are finished (None: any, authentication is off).
        """
        checks.at_most(len(acks), self._settings.max_ack_batch, ("body", "acks"), "acks")
        return await self._finish(acks, key_id, whole=False)

    def _ack_params(self, loc: checks.Loc, ack: Ack) -> tuple[Any, Any]:
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

    async def _finish(
        self, acks: Sequence[Ack], key_id: int | None, *, whole: bool
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
        done: list[tuple[int, JobRow | FinishedBrief]]  # (the ack's place among those sent, job)
        if whole:
            (one,) = first.values()
            job = await self._repo.finish_one(one, self._backoff, key_id)
            done = [(0, job)] if job is not None else []
        else:
            params = first.values()
            columns = {array: [p[field] for p in params] for array, field in _ACK_ARRAYS.items()}
            briefs = await self._repo.finish_many(columns, self._backoff, key_id)
            done = [(brief.ord - 1, brief) for brief in briefs]
        applied = {sent[place] for place, _ in done}
        telemetry.finished([job for _, job in done], [acks[sent[p]].outcome for p, _ in done])
        if done:
            limited = await self._limited.names()
            freed = sorted({job.queue for _, job in done if job.queue in limited})
            if freed:  # a limited queue has room again: wake the leases waiting on it
                await self._repo.announce_slots(freed)
        latest: dict[int, JobRow | FinishedBrief] = {job.id: job for _, job in done}
        # Explaining an ack not applied (a repeat in the batch too) takes the whole job.
        unexplained = {keys[i][0] for i in keys if i not in applied}
        if unexplained:
            for found in await self._repo.get_many(sorted(unexplained)):
                latest[found.id] = found
        answers = []
        for index, ack in enumerate(acks):
            if index in refused:
                answers.append(Finished(ack.lease_id, None, refused[index]))
                continue
            job_id, lease = keys[index]
            current = latest.get(job_id)
            error = None
            if index not in applied:
                whole_job = current if isinstance(current, JobRow) else None
                error = explain_stale(whole_job, lease, ack.outcome, key_id)
            answers.append(Finished(ack.lease_id, current, error))
        return answers
