"""In-process wake-ups for long-polling lease requests.

Waiting requests register here and hold no database connection. They are woken when a
job becomes due in one of their queues: at once when PostgreSQL announces a job that is
due now, or by a timer at the `run_at` it announced for later. Announcements are hints:
a waiter also re-checks on its own every few seconds (often, while the listener is
down), so a lost hint costs latency, never a job.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence

MAX_TIMERS_PER_QUEUE = 10_000  # past this, later due times are left to the re-check


class Waiter:
    """One waiting request: a future that any of its queues can resolve."""

    def __init__(self, queues: Sequence[str]) -> None:
        self.queues = tuple(queues)
        self.woken = asyncio.get_running_loop().create_future()

    def wake(self) -> None:
        if not self.woken.done():
            self.woken.set_result(None)

    def reset(self) -> None:
        """Arm again before the next look, so a wake-up during it is kept."""
        if self.woken.done():
            self.woken = asyncio.get_running_loop().create_future()


class Wakeups:
    """Fans database announcements out to the requests waiting in this process."""

    def __init__(self, *, poll_seconds: float, recheck_seconds: float) -> None:
        self.poll_seconds = poll_seconds  # how often waiters re-check without a listener
        self.recheck_seconds = recheck_seconds  # ... and with one
        self.listening = False
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)
        self._due: dict[str, list[float]] = defaultdict(list)  # heap of epoch seconds
        self._timers: dict[str, asyncio.TimerHandle] = {}

    @contextlib.contextmanager
    def waiter(self, queues: Sequence[str]) -> Iterator[Waiter]:
        """Register before looking for jobs, so an announcement in between is not missed."""
        waiter = Waiter(queues)
        for queue in waiter.queues:
            self._waiters[queue].add(waiter)
        try:
            yield waiter
        finally:
            for queue in waiter.queues:
                self._waiters[queue].discard(waiter)
                if not self._waiters[queue]:
                    del self._waiters[queue]

    async def wait(self, waiter: Waiter, within: float) -> bool:
        """Until woken (True), or `within` seconds or the re-check interval pass (False)."""
        if self.closed:
            return False
        interval = self.recheck_seconds if self.listening else self.poll_seconds
        try:
            await asyncio.wait_for(asyncio.shield(waiter.woken), min(within, interval))
        except TimeoutError:
            return False
        return True

    def announce(self, queue: str, due_epoch: float) -> None:
        """A job in `queue` is due at `due_epoch` (now or later)."""
        delay = due_epoch - time.time()
        if delay <= 0:
            self.wake(queue)
            return
        heap = self._due[queue]
        if len(heap) < MAX_TIMERS_PER_QUEUE:
            heapq.heappush(heap, due_epoch)
        self._arm(queue)

    def wake(self, queue: str) -> None:
        for waiter in self._waiters.get(queue, ()):
            waiter.wake()

    def wake_all(self) -> None:
        """Everyone re-checks: the listener (re)connected, or the service is stopping."""
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.wake()

    def close(self) -> None:
        """Release every waiter now and for good: the service is stopping."""
        self.closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._due.clear()
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
        delay = max(0.0, heap[0] - time.time())
        self._timers[queue] = self._loop.call_later(delay, self._fire, queue)

    def _fire(self, queue: str) -> None:
        heap = self._due[queue]
        now = time.time()
        while heap and heap[0] <= now:
            heapq.heappop(heap)
        self._timers.pop(queue, None)
        self.wake(queue)
        self._arm(queue)
