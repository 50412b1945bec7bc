"""The bell: what tells a process's event streams that new events were stamped (by
this process's stamper, or another replica's through `LISTEN jobq_events`). A stream
also reads on its own every poll interval, so a lost ring only delays it."""

from __future__ import annotations

import asyncio
import contextlib


class EventBell:
    """Rings every waiter at once; closing it ends their streams (shutdown)."""

    def __init__(self) -> None:
        self._rung = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def ring(self) -> None:
        rung, self._rung = self._rung, asyncio.Event()
        rung.set()

    async def wait(self, seconds: float) -> None:
        """Until the next ring, the close, or `seconds` passed."""
        self._loop = asyncio.get_running_loop()
        if self.closed:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._rung.wait(), seconds)

    def close(self) -> None:
        self.closed = True
        self.ring()

    def close_threadsafe(self) -> None:
        """`close` from a signal handler or another thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.close)
        else:
            self.closed = True
