"""Which queues are limited (`max_running`, `max_running_per_key`, a rate limit, or
fair), as this replica last read it, and which of them limit their running jobs (`slots`:
a job that ends there frees room for a waiting lease).

The lease of a limited queue goes through `JobsRepository.lease_limited`, which counts
under the queue's lock; the plain lease skips limited queues in SQL, so this set only
decides which statement to try first and is never what enforces a limit. It is read
again when a queue's settings change (`NOTIFY jobq_settings`), when the listener
reconnects, at least every `REFRESH_SECONDS`, and at most every `EMPTY_REFRESH_SECONDS`
when a lease found nothing: a stale set costs a queue a moment of leases, never a limit.
"""

from __future__ import annotations

import math
import time

from app.jobs.repository import JobsRepository

REFRESH_SECONDS = 5.0
EMPTY_REFRESH_SECONDS = 0.5


class LimitedQueues:
    def __init__(self, repo: JobsRepository) -> None:
        self._repo = repo
        self._names: frozenset[str] = frozenset()
        self._slots: frozenset[str] = frozenset()
        self._fair: frozenset[str] = frozenset()
        self._read_at = -math.inf

    def forget(self) -> None:
        """Read the set again before the next lease (settings changed somewhere)."""
        self._read_at = -math.inf

    async def names(self, max_age: float = REFRESH_SECONDS) -> frozenset[str]:
        if time.monotonic() - self._read_at > max_age:
            self._read_at = time.monotonic()
            found = await self._repo.limited_queues()
            self._names = frozenset(found)
            self._slots = frozenset(name for name, (slots, _) in found.items() if slots)
            self._fair = frozenset(name for name, (_, fair) in found.items() if fair)
        return self._names

    async def fair(self) -> frozenset[str]:
        """The limited queues that are fair (leased by `JobsRepository.lease_fair`), read
        as `names` is."""
        await self.names()
        return self._fair

    async def slots(self) -> frozenset[str]:
        """The limited queues that limit their running jobs, read as `names` is."""
        await self.names()
        return self._slots

    async def changed(self) -> bool:
        """Read the set again if it is older than `EMPTY_REFRESH_SECONDS`: whether it
        changed (a lease that found nothing asks, in case a queue just became limited)."""
        before = self._names
        return await self.names(EMPTY_REFRESH_SECONDS) != before
