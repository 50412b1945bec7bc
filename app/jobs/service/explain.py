"""Explain: why a job is not running now, every reason that holds, read from one
statement (`explain_job`) that mirrors the claims' rules (lease.sql).

A reason is `blocking` when it alone keeps the next lease of the job's queue from taking
the job; a job with none is `leasable`. Being behind other jobs blocks only when they
fill the room the queue's limits leave; no worker having leased its type lately does not
block (a worker may come), but it is said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.jobs.rows import ExplainRow

# Jobs ahead are counted up to this many; more is "more than MAX_AHEAD".
MAX_AHEAD = 1000
# A type no worker leased for this long is reported as unserved.
WORKER_IDLE_SECONDS = 300.0

FINISHED = frozenset({"succeeded", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Reason:
    """One thing that holds a job back (or is worth saying about its wait)."""

    code: str
    blocking: bool
    message: str
    until: datetime | None = None  # when it ends, if known
    since: datetime | None = None  # when it began, if known (a worker's last lease)
    count: int | None = None
    limit: int | None = None
    more: bool = False  # count is a lower bound (MAX_AHEAD)
    parents: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Explanation:
    """A job's state and every reason that holds now."""

    facts: ExplainRow
    reasons: list[Reason]

    @property
    def leasable(self) -> bool:
        """Queued, and nothing blocks the next lease of its queue from taking it."""
        return self.facts.state == "queued" and not any(r.blocking for r in self.reasons)


def explain(facts: ExplainRow) -> Explanation:
    """The reasons that hold for the job as `facts` found it."""
    if facts.state in FINISHED or facts.state == "running":
        return Explanation(facts, _ended(facts))
    reasons = [*_waits(facts), *_deadline(facts), *_limits(facts)]
    reasons += _behind(facts, room=_room(facts))
    reasons += _pushed(facts) if facts.push_host is not None else _workers(facts)
    return Explanation(facts, reasons)


def _ended(f: ExplainRow) -> list[Reason]:
    if f.state == "running":
        return [Reason("running", True, f"running (attempt {f.attempt} of {f.max_attempts})")]
    if f.state == "succeeded":
        return [Reason("succeeded", True, f"succeeded on attempt {f.attempt}")]
    error = f.last_error if isinstance(f.last_error, dict) else {}
    said = ": " + str(error.get("message") or error.get("type")) if error else ""
    if f.state == "failed":
        why = "attempts used up" if f.attempt >= f.max_attempts else "failed for good"
        text = f"failed after {f.attempt} of {f.max_attempts} attempts ({why}){said}"
        return [Reason("failed", True, text)]
    return [Reason("cancelled", True, f"cancelled after {f.attempt} attempts{said}")]


def _waits(f: ExplainRow) -> list[Reason]:
    found = []
    if f.state == "waiting" or f.parents_waiting:
        n = f.parents_waiting
        found.append(
            Reason("waiting_for_parents", True, f"waiting for {n} parent job(s) to finish",
                   count=n, parents=list(f.parents))
        )  # fmt: skip
    if f.scheduled:
        text = f"snoozed ({f.snoozes} time(s)) until later" if f.snoozes else "scheduled for later"
        found.append(Reason("scheduled", True, text, until=f.run_at))
    if f.paused:
        found.append(Reason("paused", True, f"queue {f.queue} is paused"))
    return found


def _deadline(f: ExplainRow) -> list[Reason]:
    """A start deadline: said while it is ahead, blocking once passed (the reaper cancels
    the job as `expired`; no lease takes it meanwhile)."""
    if f.start_by is None:
        return []
    if f.start_by <= f.at:
        text = "its start_by has passed: it is cancelled as expired, never leased"
        return [Reason("start_by_passed", True, text, since=f.start_by)]
    text = "must start by its start_by, or it is cancelled as expired"
    return [Reason("start_by", False, text, until=f.start_by)]


def _limits(f: ExplainRow) -> list[Reason]:
    found = []
    if f.max_running is not None and (f.running or 0) >= f.max_running:
        text = f"queue is at max_running ({f.running} of {f.max_running} running)"
        found.append(Reason("max_running", True, text, count=f.running, limit=f.max_running))
    per_key = f.max_running_per_key
    if f.key_running is not None and per_key is not None and f.key_running >= per_key:
        text = (
            f"concurrency key {f.concurrency_key!r} is at max_running_per_key "
            f"({f.key_running} of {per_key} running)"
        )
        found.append(Reason("max_running_per_key", True, text, count=f.key_running, limit=per_key))
    if f.rate_limit_jobs is not None and f.rate_used >= f.rate_limit_jobs:
        text = f"queue's rate limit is used ({f.rate_used} of {f.rate_limit_jobs} in its window)"
        found.append(
            Reason("rate_limit", True, text, until=f.rate_frees_at, count=f.rate_used,
                   limit=f.rate_limit_jobs)
        )  # fmt: skip
    if f.key_rate_limit_jobs is not None and f.key_rate_used >= f.key_rate_limit_jobs:
        text = (
            f"fairness key {f.fairness_key!r} has used its rate_limit_per_key "
            f"({f.key_rate_used} of {f.key_rate_limit_jobs} in its window)"
        )
        found.append(
            Reason("rate_limit_per_key", True, text, until=f.key_rate_frees_at,
                   count=f.key_rate_used, limit=f.key_rate_limit_jobs)
        )  # fmt: skip
    return found


def _room(f: ExplainRow) -> int | None:
    """How many jobs the next lease may take from the queue at most; None: no limit."""
    rooms = []
    if f.max_running is not None:
        rooms.append(f.max_running - (f.running or 0))
    if f.key_running is not None and f.max_running_per_key is not None:
        rooms.append(f.max_running_per_key - f.key_running)
    if f.rate_limit_jobs is not None:
        rooms.append(f.rate_limit_jobs - f.rate_used)
    if f.key_rate_limit_jobs is not None:
        rooms.append(f.key_rate_limit_jobs - f.key_rate_used)
    return max(0, min(rooms)) if rooms else None


def _behind(f: ExplainRow, room: int | None) -> list[Reason]:
    if f.ahead == 0 or f.scheduled:
        return []
    more = f.ahead > MAX_AHEAD
    ahead = min(f.ahead, MAX_AHEAD)
    higher = min(f.higher_priority, MAX_AHEAD)
    over = "more than " if more else ""
    text = f"behind {over}{ahead} due job(s) leased first ({higher} of higher priority)"
    # the jobs ahead take the room the limits leave (a full limit is its own reason)
    blocking = room is not None and 0 < room <= f.ahead
    return [Reason("behind", blocking, text, count=ahead, limit=room, more=more)]


def _pushed(f: ExplainRow) -> list[Reason]:
    """A pushed queue's jobs are delivered by jobq's dispatcher, not leased by workers;
    an open breaker holds every delivery to the target until it half-opens."""
    found = [Reason("pushed", False, f"queue {f.queue} is pushed to {f.push_host}")]
    if f.push_held_until is not None:
        text = f"deliveries to {f.push_host} are held: its circuit breaker is open"
        found.append(Reason("push_breaker_open", True, text, until=f.push_held_until))
    return found


def _workers(f: ExplainRow) -> list[Reason]:
    idle = timedelta(seconds=WORKER_IDLE_SECONDS)
    if f.type_leased_at is not None and f.at - f.type_leased_at <= idle:
        return []
    minutes = int(WORKER_IDLE_SECONDS // 60)
    if f.queue_leased_at is None or f.at - f.queue_leased_at > idle:
        text = f"no worker has leased from queue {f.queue} in the last {minutes} minutes"
        return [Reason("no_worker", False, text, since=f.queue_leased_at)]
    text = f"no worker has leased type {f.type} in the last {minutes} minutes"
    return [Reason("no_worker_for_type", False, text, since=f.type_leased_at)]
