"""In-process waits for a job to finish (`GET /v1/jobs/{id}?wait_seconds=`).

A waiting request registers here and holds no database connection. It is woken when
PostgreSQL announces the job finished (`NOTIFY jobq_finished, '<id>'`, sent by the
jobs table's trigger for jobs someone asked to watch), and looks again on its own every
few seconds (often, while the LISTEN connection is down): an announcement is a hint,
and a lost one costs latency, never an answer. Any database role can send one, so a
waiter's looks are paced as a lease's are (`app.jobs.waiting`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator

from app.jobs.waiting import Waiter


class Finishes:
    """The requests waiting in this process, by the job they wait for."""

    def __init__(self, *, poll_seconds: float, recheck_seconds: float) -> None:
        self.poll_seconds = poll_seconds  # how often waiters look again without a listener
        self.recheck_seconds = recheck_seconds  # ... and with one
        self.listening = False
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._waiting: dict[int, set[Waiter]] = defaultdict(set)

    @contextlib.contextmanager
    def waiter(self, job_id: int) -> Iterator[Waiter]:
        """Register before looking at the job, so an announcement in between is kept."""
        waiter = Waiter()
        self._waiting[job_id].add(waiter)
        try:
            yield waiter
        finally:
            waiters = self._waiting.get(job_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiting[job_id]

    async def wait(self, waiter: Waiter, within: float) -> None:
        """Until the job is announced finished, or `within` (or the re-check interval)."""
        if self.closed:
            return
        await waiter.wait(within, self.recheck_seconds if self.listening else self.poll_seconds)

    def announce(self, job_id: int) -> None:
        """PostgreSQL says this job finished."""
        for waiter in self._waiting.get(job_id, ()):
            waiter.wake()

    def wake_all(self) -> None:
        """Everyone looks again: the listener (re)connected, or the service is stopping."""
        for waiters in self._waiting.values():
            for waiter in waiters:
                waiter.wake()

    def close(self) -> None:
        """Release every waiter now and for good: the service is stopping."""
        self.closed = True
        self.wake_all()

    def close_threadsafe(self) -> None:
        """`close()` from a signal handler or another thread."""
        self._loop.call_soon_threadsafe(self.close)
