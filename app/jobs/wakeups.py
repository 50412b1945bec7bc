"""In-process wake-ups for long-polling lease requests.

Waiting requests register here and hold no database connection. They are woken when a
job becomes due in one of their queues: at once when PostgreSQL announces a job that is
due now, or by a timer at the `run_at` it announced for later. Announcements are hints:
a waiter also re-checks on its own every few seconds (often, while the listener is
down), so a lost hint costs latency, never a job.

An announcement of n jobs wakes n waiters, longest waiting first, not every waiter of
the queue: a herd of claims for one job would cost a statement per waiter. A waiter
that leaves holding a wake-up it did not use (it went away, or had already claimed)
hands it on. Waiters limited to some job types are always woken, since the job may not
be of their type.

A process hears announcements only while requests wait in it (and `LINGER_SECONDS`
after): one whose leases find jobs at once has nobody to wake. A waiter about to wait
makes sure it hears them (`ready`); when hearing has just begun, it first learns the
due times it missed (each queue's next delayed job, looked up once per queue) and
looks for jobs again, since one may have been announced before this process heard.

Announcements come from any database role, so no stream of them may make a waiter
spin: a waiter's looks are paced (`app.jobs.waiting.Pace`), a due time that is not a
finite number is dropped, and a timer that fires early wakes nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence

from app.jobs.waiting import Waiter

MAX_TIMERS_PER_QUEUE = 10_000  # past this, later due times are left to the re-check
MAX_TIMERS = 100_000  # ... and past this many in all queues together
MIN_TIMER_SECONDS = 0.001  # a timer is never set for now: it would fire in a loop
LINGER_SECONDS = 30.0  # announcements are heard this long after the last wait ended
HEAR_TIMEOUT_SECONDS = 5.0  # a waiter waits this long at most for hearing to begin
NextDue = Callable[[list[str]], Awaitable[list[tuple[str, float]]]]


class QueueWaiter(Waiter):
    """A lease waiting for jobs: woken by an announcement in any of its `queues`, and
    remembering when its last look began (`ready` compares it with when hearing began)."""

    def __init__(self, queues: Sequence[str], *, typed: bool = False) -> None:
        super().__init__()
        self.queues = tuple(queues)
        self.typed = typed  # it only takes some job types
        self.looked_at = 0.0  # (monotonic) when its last look for jobs began: `reset`

    def reset(self) -> None:
        """Arm again before the next look, so a wake-up during it is kept."""
        self.looked_at = time.monotonic()
        super().reset()


class Wakeups:
    """Fans database announcements out to the requests waiting in this process."""

    def __init__(
        self,
        *,
        poll_seconds: float,
        recheck_seconds: float,
        linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self.poll_seconds = poll_seconds  # how often waiters re-check without a listener
        self.recheck_seconds = recheck_seconds  # ... and with one
        self.linger_seconds = linger_seconds
        self.listening = False  # the LISTEN connection is up
        self.hearing = False  # ... and listens for due jobs
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._hear: Callable[[bool], None] = lambda _wanted: None
        self._next_due: NextDue | None = None
        self._wanted = False  # hearing is asked for
        self._began = asyncio.Event()  # set while hearing
        self._heard_since = 0.0  # (monotonic) when hearing began
        self._known: set[str] = set()  # queues whose due times were looked up since
        self._waiting = 0  # waiters in `wait` now
        self._active_at = 0.0  # (loop time) when a waiter last got ready or stopped waiting
        self._linger: asyncio.TimerHandle | None = None
        # per queue, in the order they began to wait (a dict as an ordered set)
        self._waiters: dict[str, dict[QueueWaiter, None]] = defaultdict(dict)
        # per queue, a heap of (epoch seconds, order, jobs due then; None: unknown); the
        # order breaks ties, so two entries of one due time never compare their counts
        self._due: dict[str, list[tuple[float, int, int | None]]] = defaultdict(list)
        self._order = itertools.count()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._timer_count = 0  # entries in all heaps

    @contextlib.contextmanager
    def waiter(self, queues: Sequence[str], *, typed: bool = False) -> Iterator[QueueWaiter]:
        """Register before looking for jobs, so an announcement in between is not missed.

        A wake-up still pending when the waiter leaves goes to another waiter.
        """
        waiter = QueueWaiter(queues, typed=typed)
        for queue in waiter.queues:
            self._waiters[queue][waiter] = None
        try:
            yield waiter
        finally:
            for queue in waiter.queues:
                self._waiters[queue].pop(waiter, None)
                if not self._waiters[queue]:
                    del self._waiters[queue]
            if waiter.woken.done() and not self.closed:
                for queue in waiter.queues:
                    self.wake(queue, 1)

    def hear_with(self, hear: Callable[[bool], None], next_due: NextDue) -> None:
        """How to start or stop hearing announcements of due jobs (the listener's
        `hear_due`), and to look up the due times missed meanwhile."""
        self._hear = hear
        self._next_due = next_due

    def heard(self, up: bool) -> None:
        """The listener began (True) or stopped (False) hearing announcements.

        When hearing begins, every waiter looks again: one that was already waiting (it
        came while a stop was asked and not yet done, or gave up waiting for hearing to
        begin) may have missed an announcement meanwhile.
        """
        self.hearing = up
        self._known.clear()
        if up:
            self._heard_since = time.monotonic()
            self._began.set()
            self.wake_all()
        else:
            self._began.clear()

    async def ready(self, waiter: QueueWaiter, within: float) -> bool:
        """Before `waiter` waits: make sure this process hears announcements for its
        queues. True: hearing has just begun, and the waiter looks for jobs again first
        (one may have been announced before); False: it may wait."""
        if self.closed or not self.listening or self._next_due is None:
            return False  # nothing to hear: the wait polls
        self._active_at = self._loop.time()
        if not self._wanted:
            self._wanted = True
            self._hear(True)
            self._linger_after(self.linger_seconds)
        if not self.hearing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._began.wait(), min(within, HEAR_TIMEOUT_SECONDS))
            if not self.hearing or self.closed:
                return False  # not yet: the wait polls meanwhile (or ends: closed)
        since = self._heard_since
        missed = [queue for queue in waiter.queues if queue not in self._known]
        if missed:
            due = await self._next_due(missed)
            if self._heard_since != since or not self.hearing:
                return True  # hearing began anew meanwhile: look it up again
            for queue, due_epoch in due:
                self.announce(queue, due_epoch)
            self._known.update(missed)
        return bool(missed) or waiter.looked_at < since

    async def wait(self, waiter: QueueWaiter, within: float) -> bool:
        """Until woken (True), or `within` seconds or the re-check interval pass (False)."""
        if self.closed:
            return False
        interval = self.recheck_seconds if self.hearing else self.poll_seconds
        self._waiting += 1
        try:
            return await waiter.wait(within, interval)
        finally:
            self._waiting -= 1
            self._active_at = self._loop.time()

    def announce(self, queue: str, due_epoch: float, jobs: int | None = None) -> None:
        """`jobs` jobs (None: some) in `queue` are due from `due_epoch` (now or later)."""
        if not math.isfinite(due_epoch):
            return  # a timer for it would fire at once and never pop it
        delay = due_epoch - time.time()
        if delay <= 0:
            self.wake(queue, jobs)
            return
        heap = self._due[queue]
        if len(heap) < MAX_TIMERS_PER_QUEUE and self._timer_count < MAX_TIMERS:
            heapq.heappush(heap, (due_epoch, next(self._order), jobs))
            self._timer_count += 1
        self._arm(queue)

    def wake(self, queue: str, jobs: int | None = None) -> None:
        """Wake `jobs` more of the queue's waiters (None: all), and every typed one."""
        left = jobs
        for waiter in tuple(self._waiters.get(queue, ())):
            if waiter.typed or left is None:
                waiter.wake()
            elif left > 0 and waiter.wake():
                left -= 1

    def wake_all(self) -> None:
        """Everyone re-checks: the listener (re)connected, or the service is stopping."""
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.wake()

    def _linger_after(self, delay: float) -> None:
        self._linger = self._loop.call_later(delay, self._stop_hearing_when_idle)

    def _stop_hearing_when_idle(self) -> None:
        """Stop hearing once no waiter has waited for `linger_seconds`."""
        self._linger = None
        if self._waiting:
            self._linger_after(self.linger_seconds)
            return
        idle = self._loop.time() - self._active_at
        if idle < self.linger_seconds:
            self._linger_after(self.linger_seconds - idle)
            return
        self._wanted = False
        self._hear(False)

    def close(self) -> None:
        """Release every waiter now and for good: the service is stopping."""
        self.closed = True
        self._began.set()  # a waiter waiting for hearing to begin stops waiting too
        if self._linger is not None:
            self._linger.cancel()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._due.clear()
        self._timer_count = 0
        self.wake_all()

    def close_threadsafe(self) -> None:
        """`close()` from a signal handler or another thread."""
        self._loop.call_soon_threadsafe(self.close)

    def _arm(self, queue: str) -> None:
        """Keep one timer per queue, set for its earliest announced due time."""
        heap = self._due[queue]
        current = self._timers.pop(queue, None)
        if current is not None:
            current.cancel()
        if not heap:
            del self._due[queue]
            return
        delay = max(MIN_TIMER_SECONDS, heap[0][0] - time.time())
        self._timers[queue] = self._loop.call_later(delay, self._fire, queue)

    def _fire(self, queue: str) -> None:
        heap = self._due[queue]
        now = time.time()
        jobs: int | None = 0
        due = 0
        while heap and heap[0][0] <= now:
            _, _, count = heapq.heappop(heap)
            due += 1
            jobs = None if jobs is None or count is None else jobs + count
        self._timer_count -= due
        self._timers.pop(queue, None)
        if due:  # a timer that fires before its time (the clock moved) wakes nobody
            self.wake(queue, jobs)
        self._arm(queue)
