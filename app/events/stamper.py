"""The stamper: gives committed events their commit order, in every replica.

Events are written with an id from a sequence, and ids become visible out of commit
order: a reader that resumed "after id N" could skip a smaller id committed late.
`jobq.stamp_events` gives committed events the next gapless positions (one session at
a time, under an advisory lock, so positions become visible in order), and readers
follow positions. Each replica tries every `interval_seconds` (the one that gets the
lock stamps), so events flow while any replica runs; a pass that finds a full batch
goes on at once; an outage backs off, logged once. Each pass that stamped rings the
bell: the process's streams read what it stamped (another replica's stamps arrive
through `LISTEN jobq_events`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.core.errors import DatabaseUnavailable
from app.events.repository import EventsRepository

OUTAGE_BACKOFF_MAX_SECONDS = 5.0  # a database outage: one log line, then retries this far apart
log = logging.getLogger("jobq.events")


class Stamper:
    """Stamps committed events, a batch at a time, every `interval_seconds`."""

    def __init__(
        self,
        repo: EventsRepository,
        *,
        interval_seconds: float,
        batch_size: int,
        on_stamped: Callable[[], None],
    ) -> None:
        self._repo = repo
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size
        self._on_stamped = on_stamped

    async def run_once(self) -> int:
        """Stamp every event committed so far (0 when another replica is stamping)."""
        total = 0
        while True:
            stamped = await self._repo.stamp(self.batch_size)
            if not stamped:
                break
            total += stamped
            if stamped < self.batch_size:
                break
        if total:
            self._on_stamped()
        return total

    async def run(self) -> None:
        """Stamp every `interval_seconds` until cancelled."""
        delay = self.interval_seconds
        while True:
            try:
                await self.run_once()
            except DatabaseUnavailable:
                if delay == self.interval_seconds:
                    log.warning("event stamper: database unavailable, will retry")
                delay = min(delay * 2, OUTAGE_BACKOFF_MAX_SECONDS)
            except Exception:
                log.exception("event stamper: pass failed")
                delay = OUTAGE_BACKOFF_MAX_SECONDS
            else:
                delay = self.interval_seconds
            await asyncio.sleep(delay)
