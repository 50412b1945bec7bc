"""Retention of the event outbox: the maintenance leader deletes events older than
`retain_seconds`, the oldest first, a batch at a time (a prefix of the positions, so a
stream resuming before the first event kept is told it missed some)."""

from __future__ import annotations

import logging
from functools import partial

from app.db.leader import prune_in_batches
from app.events.repository import EventsRepository

log = logging.getLogger("jobq.events")


class EventsPruner:
    """Deletes events past retention, every `interval_seconds`."""

    def __init__(
        self,
        repo: EventsRepository,
        *,
        retain_seconds: float,
        interval_seconds: float,
        batch_size: int,
    ) -> None:
        self._repo = repo
        self.retain_seconds = retain_seconds
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size

    async def run_once(self) -> int | None:
        """Events deleted; None when another replica leads."""
        total = await prune_in_batches(
            partial(self._repo.prune_batch, retain_seconds=self.retain_seconds), self.batch_size
        )
        if total:
            log.info("pruned %d events", total)
        return total
