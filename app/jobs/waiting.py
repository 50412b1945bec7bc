"""What a request waiting in this process for a database announcement holds: a wake-up
it can be armed for again, and the pace of its looks.

Two kinds of request wait: a long-polling lease for jobs in its queues (`wakeups`), and a
read for a job to finish (`finishes`). Both hold no database connection while they
wait; an announcement resolves the waiter's future, and the waiter then looks in the
database. Announcements are hints anyone can send (any database role can NOTIFY), so a
woken waiter's looks are paced (`Pace`: a burst of `LOOKS_BURST`, then at most
`LOOKS_PER_SECOND`), and a lost one costs latency: the waiter looks again on its own.
"""

from __future__ import annotations

import asyncio
import time

LOOKS_BURST = 5  # looks a waiter may take back to back when woken again and again
LOOKS_PER_SECOND = 20.0  # ... and at most this many a second after that


class Pace:
    """How often a woken waiter may look again: a token bucket of `LOOKS_BURST` looks,
    refilled at `LOOKS_PER_SECOND`. Wake-ups are hints anyone can send; this bounds the
    statements they cost, whatever their rate."""

    def __init__(self) -> None:
        self._tokens = float(LOOKS_BURST)
        self._at = time.monotonic()

    def pause(self) -> float:
        """Take a look's token: the seconds to wait before that look (0: at once)."""
        now = time.monotonic()
        self._tokens = min(float(LOOKS_BURST), self._tokens + (now - self._at) * LOOKS_PER_SECOND)
        self._at = now
        self._tokens -= 1
        return max(0.0, -self._tokens / LOOKS_PER_SECOND)

    async def woken(self, within: float) -> None:
        """After a wake-up: wait, if need be, until the waiter may look again."""
        pause = self.pause()
        if pause > 0:
            await asyncio.sleep(min(pause, within))


class Waiter:
    """One waiting request: a future that an announcement resolves, armed again before
    each look (`reset`) so that one coming during the look is kept."""

    def __init__(self) -> None:
        self.woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pace = Pace()

    def wake(self) -> bool:
        """Whether this woke it (False: it was awake already)."""
        if self.woken.done():
            return False
        self.woken.set_result(None)
        return True

    def reset(self) -> None:
        """Arm again before the next look, so a wake-up during it is kept."""
        if self.woken.done():
            self.woken = asyncio.get_running_loop().create_future()

    async def wait(self, within: float, interval: float) -> bool:
        """Until woken, then paced (True); or until `within` or `interval` seconds,
        whichever is first, pass (False: time to look again on its own)."""
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(self.woken), min(within, interval))
        except TimeoutError:
            return False
        await self.pace.woken(within - (time.monotonic() - started))
        return True
