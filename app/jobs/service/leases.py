"""Workers: lease due jobs (waiting for them if asked) and keep the leases alive."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import NamedTuple

from app.core.config import Settings
from app.core.errors import DatabaseUnavailable, ValidationFailed
from app.jobs import telemetry
from app.jobs.limits import LimitedQueues
from app.jobs.params import HeartbeatParams, ReleaseParams
from app.jobs.repository import Allowed, JobsRepository
from app.jobs.rows import JobRow, Parent, builder
from app.jobs.service import checks
from app.jobs.service.stale import explain_stale
from app.jobs.tokens import format_token, parse_token
from app.jobs.tracing import JobSpans
from app.jobs.wakeups import Wakeups


class Lease(NamedTuple):
    """One job handed out (a named tuple: a lease call builds up to 100 of them)."""

    token: str
    expires_at: datetime
    job: JobRow
    parents: list[Parent]


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a worker asks for: up to `max_jobs` due jobs of these queues (and types;
    none: any), each leased for `lease_seconds` (None: the job's own), waiting up to
    `wait_seconds` for one when none is due. `worker_id` is recorded in each job."""

    queues: Sequence[str]
    types: Sequence[str]
    max_jobs: int
    lease_seconds: int | None
    wait_seconds: float
    worker_id: str


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a worker got with a job; each part optional."""

    percent: float | None = None
    stage: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Leased:
    """A lease call's answer: the leases, the limits that held it back (by name), and
    the limited queues it left without room for anyone (`max_running` or the rate
    limit reached)."""

    leases: list[Lease]
    throttled: list[str]
    full: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Heartbeat:
    token: str
    expires_at: datetime
    cancel_requested: bool
    progress_recorded: bool


def _in_claim_order(jobs: list[JobRow]) -> None:
    """Sort `jobs` as they were claimed (best priority, then earliest run_at, then id): two
    stable sorts keyed in C (a key function is a Python call a job)."""
    jobs.sort(key=_RUN_AT_ID)
    jobs.sort(key=_PRIORITY, reverse=True)  # reverse keeps equal keys in their order


_RUN_AT_ID = attrgetter("run_at", "id")
# A job row's queue and type, by position: an attribute of a named tuple costs more,
# and these run over every job a lease hands out.
_QUEUE = itemgetter(JobRow._fields.index("queue"))
_TYPE = itemgetter(JobRow._fields.index("type"))
_QUEUE_TYPE = itemgetter(JobRow._fields.index("queue"), JobRow._fields.index("type"))


def _pairs(jobs: list[JobRow]) -> set[tuple[str, str]]:
    """The (queue, type) pairs of these jobs: most leases hold one queue's jobs of one
    type, whose two sets of strings (hashed once, no tuple a job) say so more cheaply."""
    queues = set(map(_QUEUE, jobs))
    types = set(map(_TYPE, jobs))
    if len(queues) == 1 == len(types):
        return {(queues.pop(), types.pop())}
    return set(map(_QUEUE_TYPE, jobs))


_PRIORITY = attrgetter("priority")
_RATES = {"rate_limit", "rate_limit_per_key"}  # limits a window's end frees (a timer wakes)


_NO_PARENTS: list[Parent] = []


_new_lease = builder(Lease)  # a lease call builds up to 100


def _leases(jobs: list[JobRow], parents: dict[int, list[Parent]]) -> list[Lease]:
    """A lease of each job just claimed: running, so its lease id and expiry are set (the
    table's `running_has_lease` check)."""
    return [
        _new_lease(
            (
                format_token(job.id, job.lease_id),
                job.lease_expires_at,
                job,
                parents.get(job.id, _NO_PARENTS),
            )
        )
        for job in jobs
    ]


LEASED_TYPES_EVERY_SECONDS = 5.0  # how often a process writes one (queue, type) pair


class LeasedTypes:
    """The (queue, type) pairs this process handed jobs of, in `jobq.queue_types`: what
    tells operators which queues and types some worker serves. A pair is written at most
    once every `every_seconds`, so nearly every lease writes nothing."""

    def __init__(self, repo: JobsRepository, every_seconds: float = LEASED_TYPES_EVERY_SECONDS):
        self._repo = repo
        self._every = every_seconds
        self._written: dict[tuple[str, str], float] = {}

    async def leased(self, jobs: list[JobRow]) -> None:
        now = time.monotonic()
        written = self._written
        due = [pair for pair in _pairs(jobs) if now - written.get(pair, -math.inf) >= self._every]
        if not due:
            return
        for pair in due:
            written[pair] = now
        try:
            await self._repo.record_leased_types(sorted(due))  # one lock order for all
        except DatabaseUnavailable:  # the jobs are leased all the same; the next lease writes
            for pair in due:
                written.pop(pair, None)


class Leases:
    """Hand due jobs to workers and extend their leases."""

    def __init__(
        self, repo: JobsRepository, settings: Settings, wakeups: Wakeups, limited: LimitedQueues
    ) -> None:
        self._repo = repo
        self._settings = settings
        self._wakeups = wakeups
        self._limited = limited
        self._types = LeasedTypes(repo)
        self._spans = JobSpans(settings.opentelemetry)
        self._pushed: frozenset[str] = frozenset()

    def pushed(self, queues: frozenset[str]) -> None:
        """The queues the push dispatcher delivers (`app.push`): a worker's lease passes
        them over. As this replica last read them: a worker may get a job of a queue
        pushed a moment ago, which it finishes as usual (its lease is fenced alike)."""
        self._pushed = queues

    def check(self, wanted: Wanted, loc: tuple[str, ...] = ()) -> None:
        """Refuse what no lease could grant (before a call that leases after doing
        something else: acks are applied only when the lease they carry may be asked)."""
        settings = self._settings
        if wanted.max_jobs > settings.max_lease_batch:
            raise ValidationFailed.field(
                (*loc, "max_jobs"),
                f"must be at most {settings.max_lease_batch}",
                "less_than_equal",
            )
        checks.lease_seconds(
            wanted.lease_seconds, settings.max_lease_seconds, (*loc, "lease_seconds")
        )

    async def lease(
        self,
        wanted: Wanted,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
        key_id: int | None = None,
        allowed: Allowed = None,
        *,
        pushing: bool = False,
    ) -> Leased:
        """Hand up to `max_jobs` due jobs to one worker, best priority first.

        With `wait_seconds`, an empty answer waits (holding no database connection) until
        a job is announced in one of the queues, a limited queue has room again, or time
        runs out. A caller that went away meanwhile (`abandoned`) is not handed jobs it
        could never receive. The leases are bound to `key_id`: only that API key may
        heartbeat or finish them. Limited queues are leased after the others, each
        within its limits. A child is handed its parents of the `allowed` queues (the
        key's; None: any), with their results. Pushed queues are left to the push
        dispatcher, which leases them `pushing`.
        """
        settings = self._settings
        started = self._spans.start()
        self.check(wanted)
        queues = list(dict.fromkeys(wanted.queues))
        if self._pushed and not pushing:
            queues = [queue for queue in queues if queue not in self._pushed]
        claim = functools.partial(
            self._claim,
            queues=queues,
            types=list(dict.fromkeys(wanted.types)),
            max_jobs=wanted.max_jobs,
            lease_seconds=checks.lease_seconds(
                wanted.lease_seconds, settings.max_lease_seconds, ("lease_seconds",)
            ),
            worker_id=wanted.worker_id,
            key_id=key_id,
        )
        deadline = time.monotonic() + wanted.wait_seconds
        throttled: list[str] = []
        full: set[str] = set()
        with self._wakeups.waiter(queues, typed=bool(wanted.types)) as waiter:
            while True:
                waiter.reset()
                full.clear()
                jobs, throttled = await claim(full=full)
                if not jobs and await self._limited.changed():
                    full.clear()
                    jobs, throttled = await claim(full=full)  # a queue became limited: ask it so
                left = deadline - time.monotonic()
                if jobs or left <= 0 or self._wakeups.closed:
                    break
                if await self._wakeups.ready(waiter, left):
                    continue  # this process has just begun to hear announcements
                await self._wakeups.wait(waiter, left)
                if abandoned is not None and await abandoned():
                    return Leased([], [])
        telemetry.leased(jobs)
        if jobs:
            await self._types.leased(jobs)
            self._spans.record("lease", started, queues[0] if len(queues) == 1 else None, jobs)
        _in_claim_order(jobs)
        parents: dict[int, list[Parent]] = {}
        children = [job.id for job in jobs if job.has_parents]
        if children:  # a child is handed its parents' results
            for parent in await self._repo.parents_of(children, allowed):
                parents.setdefault(parent.child_id, []).append(parent)
        return Leased(_leases(jobs, parents), throttled, frozenset(full))

    async def _claim(
        self,
        queues: list[str],
        types: list[str],
        max_jobs: int,
        lease_seconds: int | None,
        worker_id: str,
        key_id: int | None,
        full: set[str],
    ) -> tuple[list[JobRow], list[str]]:
        """One look: the plain queues first, then each limited one with the room left;
        the jobs, and the limits that held a limited queue back (the queues left with
        no room for anyone are added to `full`)."""
        limited = await self._limited.names()
        fair = await self._limited.fair()
        plain = [q for q in queues if q not in limited]
        lease = functools.partial(
            self._repo.lease,
            types=types,
            lease_seconds=lease_seconds,
            worker_id=worker_id,
            key_id=key_id,
        )
        jobs = await lease(queues=plain, max_jobs=max_jobs) if plain else []
        throttled: list[str] = []
        for queue in (q for q in queues if q in limited):
            left = max_jobs - len(jobs)
            if left <= 0:
                break
            found = None
            if queue in fair:  # one call, which takes the queue's row itself
                found = await self._repo.lease_fair(
                    queue, types, left, lease_seconds, worker_id, key_id
                )
            if found is None:  # not fair (any more): under the queue's row, as any limited
                if queue in fair:
                    self._limited.forget()
                found = await self._repo.lease_limited(
                    queue, types, left, lease_seconds, worker_id, key_id
                )
            if found is None:  # no longer limited
                self._limited.forget()
                jobs += await lease(queues=[queue], max_jobs=left)
                continue
            got, state = found
            jobs += got
            if state is not None:
                reasons = state.reasons
                throttled += [r for r in reasons if r not in throttled]
                if "max_running" in reasons or "rate_limit" in reasons:
                    full.add(queue)
                if state.rate_frees_at is not None and _RATES.intersection(reasons):
                    self._wakeups.announce(queue, state.rate_frees_at)  # a timer, no polling
        return jobs, throttled

    async def release(self, token: str, delay_seconds: float) -> bool:
        """Give a live lease's job back to its queue, due in `delay_seconds`, its attempt
        not spent; whether the lease was live. The push dispatcher's (429/503 with
        Retry-After, or stopping mid-delivery)."""
        job_id, lease = parse_token(token)
        return await self._repo.release(ReleaseParams(job_id, lease, delay_seconds))

    async def heartbeat(
        self,
        token: str,
        extend_seconds: int | None = None,
        progress: Progress | None = None,
        key_id: int | None = None,
    ) -> Heartbeat:
        """Extend a live lease from now (by `extend_seconds`; None: its current length)
        and record `progress` (None: unchanged)."""
        job_id, lease = parse_token(token)
        beat = await self._repo.heartbeat(
            HeartbeatParams(
                job_id=job_id,
                lease_id=lease,
                extend_seconds=checks.lease_seconds(
                    extend_seconds, self._settings.max_lease_seconds, ("extend_seconds",)
                ),
                has_progress=progress is not None,
                percent=progress.percent if progress else None,
                stage=progress.stage if progress else None,
                message=progress.message if progress else None,
                min_interval=self._settings.heartbeat_min_interval_seconds,
                key_id=key_id,
            )
        )
        if beat is not None:
            return Heartbeat(
                token,
                beat.lease_expires_at,
                beat.cancel_requested,
                progress_recorded=beat.written and progress is not None,
            )
        error = explain_stale(await self._repo.get(job_id), lease, None, key_id)
        assert error is not None
        raise error
