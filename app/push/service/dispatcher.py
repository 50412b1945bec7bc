"""The push dispatcher: in each replica, a background part that leases due jobs of the
pushed queues and POSTs each to its queue's target, signed.

It leases as a worker does (`app.jobs` `Leases.lease`, `pushing`): the same claim, the
same limits (`max_running`, `rate_limit`), the same fencing and reaper. Each lease lasts
the longest timeout of the queues leased plus a margin (`JOBQ_PUSH_LEASE_MARGIN_SECONDS`),
so it outlives its delivery. The answer decides the job (see docs/push.md, "Outcomes"):

- 2xx (not 202): the job succeeded; the body (its JSON, else its text) is its result.
- 202 Accepted: the job stays running; the endpoint finishes it later with the
  envelope's `lease_id` through the ordinary calls (heartbeat, complete, fail).
- 429 or 503 with Retry-After: the job is queued again after that, its attempt not
  spent.
- Any other status, a timeout, no answer: a failed attempt (`http_<status>`, `timeout`,
  `connection`, `refused`) with an excerpt of the answer, retried by the queue's backoff.

The deliveries' completes and fails are written together (`Finisher`): those that end
while a batch is being written go in the next, one round trip. A success writes the
target's breaker only when it has something to forget (failures, trips, a pause).

At most `concurrency` deliveries are in flight; each round leases no more than the room
left. A round with nothing due waits on the enqueue announcements (`Wakeups`), as a
long-polling worker does. Targets whose circuit breaker is open (`app.delivery.Breakers`)
are left out until it closes. Each delivery is counted in memory (`Tally`) and the
counts are added to `jobq.push_minutes` every `flush_seconds`, in one statement: the
statistics every replica reads (`push_stats`). At shutdown the deliveries in flight get
`DRAIN_SECONDS` to end; the leases of those still going are given back (`release`), not spent.
An answer that arrives while the database is away is not dropped: writing what it
decided is tried again, with a growing pause, until the database answers or the lease
expires (then the reaper gives the job back, to be delivered again).

Tests call `run_once(wait_seconds=0)`, `drain()` and `flush()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pydantic_core

from app.core import shutdown
from app.core.errors import DatabaseUnavailable, JobqError
from app.delivery import Allowlist, Attempt, Breakers, BreakerState, create_transport, send, sign
from app.jobs import Ack, AttemptError, JobServices, Lease, Wanted
from app.push import telemetry
from app.push.repository import PushRepository
from app.push.service.finisher import Finisher
from app.push.service.tally import RETRY_LATER, Tally
from app.push.service.targets import PushTarget, PushTargets

log = logging.getLogger("jobq.push")

IDLE_WAIT_SECONDS = 1.0  # a round with nothing due waits this long for an announcement
TARGETS_REFRESH_SECONDS = 5.0  # targets are read again at least this often
BREAKERS_REFRESH_SECONDS = 1.0  # ... and the breakers of the targets
DRAIN_SECONDS = 5.0  # at shutdown, deliveries in flight get this long to end
ERROR_PAUSE_SECONDS = 1.0  # after a round failed (the database away, say)
SETTLE_PAUSES_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.0)  # between tries to write an answer's
# outcome while the database is away; the last one repeats

T = TypeVar("T")


def worker_id() -> str:
    """What the dispatcher's leases record as their worker."""
    return f"push@{socket.gethostname()}:{os.getpid()}"


def trace_headers(lease: Lease) -> dict[str, str]:
    """The job's W3C trace context as a delivery's headers (none without one): an
    instrumented endpoint's span then continues the trace the job was enqueued in."""
    job = lease.job
    if job.traceparent is None:
        return {}
    if job.tracestate is None:
        return {"traceparent": job.traceparent}
    return {"traceparent": job.traceparent, "tracestate": job.tracestate}


def envelope(lease: Lease) -> dict[str, Any]:
    """The JSON body of a delivery."""
    job = lease.job
    return {
        "job_id": job.id,
        "queue": job.queue,
        "type": job.type,
        "payload": job.payload,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "lease_id": lease.token,
        "lease_expires_at": lease.expires_at,
        "metadata": job.metadata,
        "parents": [
            {"id": p.id, "type": p.type, "state": p.state, "result": p.result}
            for p in lease.parents
        ],
    }


def message_id(lease: Lease) -> str:
    """The delivery's `webhook-id`: the same for a repeat of one attempt (after a
    Retry-After, say), another for each new attempt."""
    return f"job_{lease.job.id}_attempt_{lease.job.attempt}"


def _result(body: bytes) -> Any:
    """A 2xx answer's body as the job's result: its JSON, its text, or None if empty."""
    if not body.strip():
        return None
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        return body.decode("utf-8", "replace")


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


class Dispatcher:
    """Delivers the pushed queues' jobs from this replica."""

    name = "push dispatcher"

    def __init__(
        self,
        targets: PushTargets,
        jobs: JobServices,
        breakers: Breakers,
        allowlist: Allowlist,
        repo: PushRepository,
        *,
        concurrency: int,
        max_lease_batch: int,
        max_ack_batch: int,
        max_body_bytes: int,
        drain_seconds: float = DRAIN_SECONDS,
        lease_margin_seconds: int,
        flush_seconds: float,
        on_attempt: Callable[[PushTarget, Attempt], None] | None = None,
    ) -> None:
        self._targets_service = targets
        self._jobs = jobs
        self._breakers = breakers
        self._allowlist = allowlist
        self.concurrency = concurrency
        self._max_lease_batch = max_lease_batch
        self._max_body_bytes = max_body_bytes
        self._drain_seconds = drain_seconds
        self._lease_margin_seconds = lease_margin_seconds
        self._on_attempt = on_attempt
        self._repo = repo
        self._finisher = Finisher(jobs.acks, max_batch=max_ack_batch)
        self._tally = Tally()
        self._flush_seconds = flush_seconds
        self._flushed_at = time.monotonic()
        self._worker_id = worker_id()
        self._targets: dict[str, PushTarget] = {}
        self._targets_read_at = -math.inf
        self._breaker_states: dict[str, BreakerState] = {}
        self._breakers_read_at = -math.inf
        self._changed = asyncio.Event()
        self._room = asyncio.Event()
        self._held: dict[str, asyncio.Task[None]] = {}  # lease token → its delivery
        self._transport = create_transport(max_connections=max(concurrency, 1))
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ---- background part ---------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Stop leasing; let the deliveries in flight end for `drain_seconds`, then give
        the leases of those still going back to their queues."""
        self._stopping = True  # the round under way ends (the long polls are released)
        self._changed.set()
        self._room.set()
        if self._task is not None:
            done, _ = await asyncio.wait([self._task], timeout=self._drain_seconds)
            if not done:
                await shutdown.stop_tasks([self._task])
        await self.drain(self._drain_seconds)
        late = list(self._held.items())
        for _token, task in late:
            task.cancel()
        await asyncio.gather(*(task for _, task in late), return_exceptions=True)
        await self._finisher.close()
        for token, _task in late:
            with contextlib.suppress(JobqError):
                await self._jobs.leases.release(token, 0)
        self._held.clear()
        try:
            await self.flush()
        except (DatabaseUnavailable, JobqError):
            log.warning("push: %d minutes of delivery statistics not written", len(self._tally))
        await self._transport.aclose()

    def forget(self) -> None:
        """Read the targets again before the next round (settings changed somewhere)."""
        self._targets_read_at = -math.inf
        self._changed.set()

    async def drain(self, seconds: float | None = None) -> None:
        """Wait for the deliveries in flight (at most `seconds`)."""
        tasks = list(self._held.values())
        if tasks:
            await asyncio.wait(tasks, timeout=seconds)

    async def flush(self) -> None:
        """Add the deliveries counted since the last flush to `jobq.push_minutes`; kept
        for the next one if the write fails."""
        self._flushed_at = time.monotonic()
        params = self._tally.take()
        if params is None:
            return
        try:
            await self._repo.add_minutes(params)
        except BaseException:
            self._tally.give_back(params)
            raise

    @property
    def in_flight(self) -> int:
        return len(self._held)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.run_once(IDLE_WAIT_SECONDS)
                if time.monotonic() - self._flushed_at >= self._flush_seconds:
                    await self.flush()
            except DatabaseUnavailable:
                log.warning("push: database unavailable, will retry")
                await asyncio.sleep(ERROR_PAUSE_SECONDS)
            except Exception:
                log.exception("push: round failed")
                await asyncio.sleep(ERROR_PAUSE_SECONDS)

    # ---- one round -----------------------------------------------------------------

    async def targets(self) -> dict[str, PushTarget]:
        """The pushed queues' targets, read again when stale; the jobs' leases are told
        which queues are pushed (workers pass them over)."""
        now = time.monotonic()
        if now - self._targets_read_at > TARGETS_REFRESH_SECONDS:
            self._changed.clear()
            self._targets_read_at = now
            self._targets = {t.queue: t for t in await self._targets_service.all()}
            self._jobs.leases.pushed(frozenset(self._targets))
        return self._targets

    async def _closed_breakers(self, targets: dict[str, PushTarget]) -> list[str]:
        now = time.monotonic()
        if now - self._breakers_read_at > BREAKERS_REFRESH_SECONDS:
            self._breakers_read_at = now
            keys = [t.breaker for t in targets.values()]
            self._breaker_states = await self._breakers.states(keys)
        return [
            queue
            for queue, target in targets.items()
            if not (state := self._breaker_states.get(target.breaker)) or not state.open
        ]

    async def run_once(self, wait_seconds: float = 0.0) -> int:
        """Lease what there is room for and start delivering it; how many deliveries
        began. With nothing to do, waits up to `wait_seconds` (for a job, a target,
        room)."""
        if self._stopping:
            return 0
        targets = await self.targets()
        room = min(self.concurrency - len(self._held), self._max_lease_batch)
        if not targets:
            await _wait(self._changed, wait_seconds)
            return 0
        if room <= 0:
            self._room.clear()
            await _wait(self._room, wait_seconds)
            return 0
        ready = await self._closed_breakers(targets)
        if not ready:
            await _wait(self._changed, wait_seconds)
            return 0
        lease_seconds = math.ceil(max(targets[q].timeout_seconds for q in ready))
        wanted = Wanted(
            queues=ready,
            types=(),
            max_jobs=room,
            lease_seconds=lease_seconds + self._lease_margin_seconds,
            wait_seconds=wait_seconds,
            worker_id=self._worker_id,
        )
        leased = await self._jobs.leases.lease(wanted, pushing=True)
        for lease in leased.leases:
            target = targets.get(lease.job.queue)
            if target is None:  # cannot be: leased from `ready`
                continue
            task = asyncio.create_task(self._deliver(lease, target))
            self._held[lease.token] = task
            task.add_done_callback(functools.partial(self._ended, lease.token))
        return len(leased.leases)

    def _ended(self, token: str, _task: asyncio.Task[None]) -> None:
        self._held.pop(token, None)
        self._room.set()

    # ---- one delivery --------------------------------------------------------------

    async def _deliver(self, lease: Lease, target: PushTarget) -> None:
        held = self._breaker_states.get(target.breaker)
        if held is not None and held.open:
            # leased by a round that began before the breaker opened: given back, due
            # again in a moment, when the rounds leave the queue out while it is open (a
            # reset lets it go at once)
            with contextlib.suppress(JobqError):
                await self._jobs.leases.release(lease.token, BREAKERS_REFRESH_SECONDS)
            return
        body = pydantic_core.to_json(envelope(lease))
        signed = sign(target.secrets, message_id(lease), body.decode())
        headers = {**target.headers, **trace_headers(lease), **signed}
        attempt = await send(
            self._transport,
            self._allowlist,
            target.url,
            body,
            headers,
            timeout_seconds=target.timeout_seconds,
            max_body_bytes=self._max_body_bytes,
        )
        telemetry.delivered(target.queue, attempt.status_class, attempt.seconds)
        self._tally.count(target.queue, attempt)
        if self._on_attempt is not None:
            self._on_attempt(target, attempt)
        try:
            await self._settle(lease, target, attempt)
        except JobqError as exc:  # the lease went meanwhile (cancelled, reaped), say
            log.info("push: job %s: %s", lease.job.id, exc.detail)
        except Exception:
            log.exception("push: job %s: settling the delivery failed", lease.job.id)

    async def _settle(self, lease: Lease, target: PushTarget, attempt: Attempt) -> None:
        """Turn the answer into the job's next state, and count it on the breaker; each
        write tried again while the database is away (`_stored`)."""
        leases = self._jobs.leases
        wait = attempt.retry_after()
        if attempt.status in RETRY_LATER and wait is not None and attempt.failure is None:
            # the target is busy, not broken
            await _stored(lease, lambda: leases.release(lease.token, wait))
            return
        await _stored(lease, lambda: self._record(target, attempt))
        if attempt.ok and attempt.status == 202:
            return  # the endpoint finishes the job with the lease id
        if attempt.ok:
            refused = await self._ack(lease, Ack(lease.token, "complete", _result(attempt.body)))
            if refused is None:
                return
            if refused.status not in (413, 422):
                raise refused
            error = AttemptError("push_result_refused", refused.detail, {"status": attempt.status})
        else:
            error = AttemptError(
                f"http_{attempt.status}" if attempt.failure is None else attempt.status_class,
                attempt.excerpt(),
                {"status": attempt.status, "seconds": round(attempt.seconds, 3)},
            )
        refused = await self._ack(lease, Ack(lease.token, "fail", None, error, retryable=True))
        if refused is not None:
            raise refused

    async def _ack(self, lease: Lease, ack: Ack) -> JobqError | None:
        """Finish the job with the other deliveries' acks (`Finisher`); why it was
        refused, if it was."""
        finished = await _stored(lease, lambda: self._finisher.finish(ack))
        return finished.error

    async def _record(self, target: PushTarget, attempt: Attempt) -> None:
        ok = attempt.ok
        known = self._breaker_states.get(target.breaker)
        if ok and known is not None and _clean(known):
            return  # a success has nothing to reset (as read within BREAKERS_REFRESH_SECONDS)
        state = await self._breakers.record(
            target.breaker, ok, error="" if ok else f"{attempt.status_class}: {attempt.excerpt()}"
        )
        if ok:
            self._breaker_states[target.breaker] = BreakerState(target.breaker)
        elif state is not None and state.open:
            self._breaker_states[target.breaker] = state  # this replica holds back at once


async def _stored(lease: Lease, write: Callable[[], Awaitable[T]]) -> T:
    """`write()`, tried again while the database is away (`SETTLE_PAUSES_SECONDS`
    apart) until it answers or `lease` expires: then the last `DatabaseUnavailable`
    goes up, and the reaper gives the job back."""
    tries = 0
    while True:
        try:
            return await write()
        except DatabaseUnavailable:
            pause = SETTLE_PAUSES_SECONDS[min(tries, len(SETTLE_PAUSES_SECONDS) - 1)]
            if (lease.expires_at - datetime.now(UTC)).total_seconds() < pause:
                raise
            tries += 1
            await asyncio.sleep(pause)


def _clean(state: BreakerState) -> bool:
    """Nothing for a success to reset: no failures counted, no trip, no pause (a breaker
    that failed once keeps its last error to show, which a success does not clear)."""
    return not state.failures and not state.trips and state.open_until is None
