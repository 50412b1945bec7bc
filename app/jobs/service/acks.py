"""Workers: complete or fail leased jobs, one call per job or many acks in one call.

The single calls are acks of one. An ack that is not applied is explained from the
job's history (see `stale`); a repeat of the same finishing call is answered as the
first was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple
from uuid import UUID

from app.core.config import Settings
from app.core.errors import JobqError, LeaseNotFound, PayloadTooLarge, ValidationFailed
from app.core.retry import Backoff
from app.jobs import payloads, telemetry
from app.jobs.limits import LimitedQueues
from app.jobs.params import AckColumns, AckParams
from app.jobs.repository import JobsRepository
from app.jobs.rows import FinishedBrief, JobRow, builder
from app.jobs.service import checks
from app.jobs.service.stale import Outcome, explain_stale
from app.jobs.tokens import parse_token
from app.jobs.tracing import JobSpans
from app.jobs.wakeups import Wakeups

Key = tuple[int, UUID]  # a lease: its job's id, and the lease's own


@dataclass(frozen=True, slots=True)
class AttemptError:
    """Why an attempt failed: what failed (an exception class, say), and what it said."""

    type: str
    message: str
    details: Any


class Ack(NamedTuple):
    """One lease to finish (a named tuple: an ack call takes up to 1000): completed with
    its `result`, or failed with its `error`, retried unless not `retryable`, after
    `retry_after_seconds` if given (else the backoff)."""

    token: str
    outcome: Outcome
    result: Any = None
    error: AttemptError | None = None
    retryable: bool = True
    retry_after_seconds: float | None = None


# What follows the lease in a complete without a result (most acks).
_PLAIN_COMPLETE: tuple[Any, ...] = ("complete", "null", None, True, None)
_finish = builder(AckParams)  # an ack of 100 leases builds 100


class Finished(NamedTuple):
    """One ack's answer: the job as it now is (whole, or in brief in a batch), or why the
    ack was refused."""

    token: str
    job: JobRow | FinishedBrief | None
    error: JobqError | None


_TOKEN = itemgetter(Ack._fields.index("token"))
_OUTCOME = itemgetter(Ack._fields.index("outcome"))
_RESULT = itemgetter(Ack._fields.index("result"))
_ORD = attrgetter("ord")
_JOB_ID = itemgetter(0)


def _plain_keys(acks: Sequence[Ack]) -> list[Key] | None:
    """Each ack's lease, when every ack completes a lease jobq issued, each of another
    job, and none has a result (most batches); else None (`Acks._finish` sorts the batch
    out)."""
    if set(map(_OUTCOME, acks)) != {"complete"} or list(map(_RESULT, acks)).count(None) < len(acks):
        return None
    try:
        keys = list(map(parse_token, map(_TOKEN, acks)))
    except LeaseNotFound:
        return None
    return keys if len(set(map(_JOB_ID, keys))) == len(keys) else None


_finished = builder(Finished)  # an ack of 100 leases builds 100


class Acks:
    """Complete or fail leases."""

    def __init__(
        self, repo: JobsRepository, settings: Settings, limited: LimitedQueues, wakeups: Wakeups
    ) -> None:
        self._repo = repo
        self._settings = settings
        self._backoff = Backoff.from_settings(settings)
        self._limited = limited
        self._wakeups = wakeups
        self._spans = JobSpans(settings.opentelemetry)

    async def complete(self, token: str, result: Any = None, key_id: int | None = None) -> JobRow:
        """Mark the leased job succeeded, with its `result`."""
        ack = Ack(token, "complete", result)
        return self._one(await self._finish([ack], key_id, whole=True))

    async def fail(
        self,
        token: str,
        error: AttemptError,
        *,
        retryable: bool,
        retry_after_seconds: float | None,
        key_id: int | None = None,
    ) -> JobRow:
        """Record a failed attempt: retried after a backoff (or `retry_after_seconds`),
        or failed for good when no try is left or it is not `retryable`."""
        ack = Ack(token, "fail", None, error, retryable, retry_after_seconds)
        return self._one(await self._finish([ack], key_id, whole=True))

    @staticmethod
    def _one(results: list[Finished]) -> JobRow:
        (result,) = results
        if result.error is not None:
            raise result.error
        assert isinstance(result.job, JobRow)  # a single call's answer is read whole
        return result.job

    async def finish(
        self, acks: Sequence[Ack], key_id: int | None = None, *, hand_off: bool = True
    ) -> list[Finished]:
        """Complete or fail many leases in one round trip; one answer per ack, in order.

        Only leases taken with `key_id` are finished (None: any, authentication is off).
        Without `hand_off`, the leases waiting on the limited queues whose slots these
        acks freed are left for the caller to wake (`hand_off`): it leases first.
        """
        checks.at_most(len(acks), self._settings.max_ack_batch, ("acks",), "acks")
        keys = _plain_keys(acks)
        if keys is not None:
            return await self._complete_plain(acks, keys, key_id, hand_off)
        return await self._finish(acks, key_id, whole=False, hand_off=hand_off)

    async def hand_off(self, finished: Sequence[Finished], full: frozenset[str]) -> None:
        """Wake the leases waiting for the slots that `finished` freed, but on the
        limited queues in `full` (the caller's own lease took their room again)."""
        jobs = [f.job for f in finished if f.error is None and f.job is not None]
        await self._wake_freed(jobs, full)

    async def _complete_plain(
        self, acks: Sequence[Ack], keys: list[Key], key_id: int | None, hand_off: bool
    ) -> list[Finished]:
        """`_finish` for a batch of completes without results, of distinct valid tokens
        (most batches): nothing refused on its own, each ack's parameters the same but
        its lease, and when all are applied each answer is its row."""
        started = self._spans.start()
        count = len(acks)
        job_ids, lease_ids = map(list, zip(*keys, strict=True))
        plain = ([value] * count for value in _PLAIN_COMPLETE)
        columns = AckColumns(job_ids, lease_ids, *plain)
        briefs = await self._repo.finish_many(columns, self._backoff, key_id)
        telemetry.finished(briefs, ["complete"] * len(briefs))
        self._spans.record("complete", started, None, briefs)
        if hand_off:
            await self._wake_freed(briefs)
        if len(briefs) == count:  # each ack's row is the one of its place (`ord`)
            briefs.sort(key=_ORD)
            return list(map(_finished, zip(map(_TOKEN, acks), briefs, repeat(None))))
        done: list[tuple[int, JobRow | FinishedBrief]] = [(b.ord - 1, b) for b in briefs]
        return await self._answers(acks, list(keys), list(range(count)), done, key_id)

    async def _wake_freed(
        self, jobs: Sequence[JobRow | FinishedBrief], full: frozenset[str] = frozenset()
    ) -> None:
        """Wake the leases waiting on a queue with a limit on running jobs that finishing
        `jobs` gave room (but the queues in `full`): this process's own at once (the slot
        handed off without a round trip through PostgreSQL), the other replicas' by an
        announcement."""
        if jobs:
            bounded = await self._limited.slots() - full
            freed = sorted({job.queue for job in jobs if job.queue in bounded})
            for queue in freed:
                self._wakeups.wake(queue, 1)
            if freed:
                await self._repo.announce_slots(freed)

    def _stored(self, ack: Ack, index: int, whole: bool) -> tuple[Any, ...]:
        """The ack's outcome, result and error as jsonb text, retryable and retry delay
        (an AckParams' fields after the lease's), for an ack with a result or an error;
        raises if it is too large or too deep."""
        loc = () if whole else ("acks", index)
        limit = self._settings.max_payload_bytes
        depth = self._settings.max_json_depth
        if ack.outcome == "complete":
            result = payloads.encode(
                ack.result, field=(*loc, "result"), max_bytes=limit, max_depth=depth
            )
            return ("complete", result, None, True, None)
        assert ack.error is not None  # a fail's
        payloads.check_depth(ack.error.details, field=(*loc, "error", "details"), max_depth=depth)
        error = {
            "type": ack.error.type,
            "message": payloads.truncate_utf8(
                ack.error.message, self._settings.max_error_message_bytes
            ),
            "details": ack.error.details,
        }
        error_text = payloads.encode(error, field=(*loc, "error"), max_bytes=limit)
        return ("fail", None, error_text, ack.retryable, ack.retry_after_seconds)

    async def _finish(
        self, acks: Sequence[Ack], key_id: int | None, *, whole: bool, hand_off: bool = True
    ) -> list[Finished]:
        """`whole`: the single call's one ack, answered with the whole job (its errors
        name its own fields); else a batch, answered with brief rows.

        An ack that was not applied is answered with its job read whole, to explain why.
        """
        started = self._spans.start()
        # An ack's own fault (a token never issued, a result or error too large or too
        # deep) is its answer alone, as for the single call, and it is not sent. Each
        # other lease goes to the database once; a repeat in the batch is judged after.
        judged: list[Key | JobqError] = []  # each ack's lease, or why it is refused
        sent: dict[Key, int] = {}  # each lease sent: the index of the first ack naming it
        finishes: list[AckParams] = []  # and what is sent for it, in the same order
        for index, ack in enumerate(acks):
            try:
                key = parse_token(ack.token)
                if ack.outcome == "complete" and ack.result is None:  # most acks
                    rest = _PLAIN_COMPLETE
                else:
                    rest = self._stored(ack, index, whole)
            except (LeaseNotFound, PayloadTooLarge, ValidationFailed) as exc:
                judged.append(exc)
                continue
            judged.append(key)
            if key not in sent:
                sent[key] = index
                finishes.append(_finish((*key, *rest)))
        if not sent:  # every ack refused on its own: nothing to ask the database
            refusals = [error for error in judged if isinstance(error, JobqError)]
            return [Finished(ack.token, None, e) for ack, e in zip(acks, refusals, strict=True)]
        done: list[tuple[int, JobRow | FinishedBrief]]  # (the ack's place among those sent, job)
        if whole:
            job = await self._repo.finish_one(finishes[0], self._backoff, key_id)
            done = [(0, job)] if job is not None else []
        else:
            columns = AckColumns(*map(list, zip(*finishes, strict=True)))
            briefs = await self._repo.finish_many(columns, self._backoff, key_id)
            done = [(brief.ord - 1, brief) for brief in briefs]
        jobs = [job for _, job in done]
        outcomes = [finishes[place].outcome for place, _ in done]
        telemetry.finished(jobs, outcomes)
        self._spans.finished(started, jobs, outcomes)
        if hand_off:
            await self._wake_freed(jobs)
        if len(done) == len(acks):  # every ack applied (so none refused, none repeated)
            answered: list[JobRow | FinishedBrief | None] = [None] * len(acks)
            for place, finished in done:
                answered[place] = finished
            return list(map(_finished, zip(map(_TOKEN, acks), answered, repeat(None))))
        return await self._answers(acks, judged, list(sent.values()), done, key_id)

    async def _answers(
        self,
        acks: Sequence[Ack],
        judged: Sequence[Key | JobqError],
        sent: list[int],
        done: list[tuple[int, JobRow | FinishedBrief]],
        key_id: int | None,
    ) -> list[Finished]:
        """Each ack's answer when some were not applied: those are explained from their
        jobs, read whole."""
        applied = {sent[place] for place, _ in done}
        latest: dict[int, JobRow | FinishedBrief] = {job.id: job for _, job in done}
        # Explaining an ack not applied (a repeat in the batch too) takes the whole job.
        unexplained = {
            key[0] for i, key in enumerate(judged) if isinstance(key, tuple) and i not in applied
        }
        if unexplained:
            for found in await self._repo.get_many(sorted(unexplained)):
                latest[found.id] = found
        answers = []
        for index, (ack, key) in enumerate(zip(acks, judged, strict=True)):
            if isinstance(key, JobqError):
                answers.append(Finished(ack.token, None, key))
                continue
            job_id, lease = key
            current = latest.get(job_id)
            error = None
            if index not in applied:
                whole_job = current if isinstance(current, JobRow) else None
                error = explain_stale(whole_job, lease, ack.outcome, key_id)
            answers.append(Finished(ack.token, current, error))
        return answers
