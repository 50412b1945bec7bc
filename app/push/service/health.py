"""A pushed queue's health as operators see it: its target and its circuit breaker
(the one every replica reads, in PostgreSQL), the breaker's manual reset, and its
deliveries of the last minute and hour (`jobq.push_minutes`, every replica's)."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import NotFound
from app.delivery import Breakers, BreakerState
from app.push.repository import PushRepository
from app.push.rows import PushStatsRow
from app.push.service.targets import PushTarget, PushTargets, breaker_key


@dataclass(frozen=True, slots=True)
class PushHealth:
    target: PushTarget
    breaker: BreakerState


@dataclass(frozen=True, slots=True)
class PushDeliveries:
    """A pushed queue's deliveries, counted by every replica, and its breaker."""

    target: PushTarget
    stats: PushStatsRow
    breaker: BreakerState


class PushHealthService:
    """Read a pushed queue's target, breaker and deliveries; close the breaker."""

    def __init__(self, targets: PushTargets, breakers: Breakers, repo: PushRepository) -> None:
        self._targets = targets
        self._breakers = breakers
        self._repo = repo

    async def _target(self, queue: str) -> PushTarget:
        target = await self._targets.get(queue)
        if target is None:
            raise NotFound(f"Queue {queue!r} has no push target.")
        return target

    async def get(self, queue: str) -> PushHealth:
        target = await self._target(queue)
        states = await self._breakers.states([target.breaker])
        return PushHealth(target, states[target.breaker])

    async def reset(self, queue: str) -> PushHealth:
        """Close the queue's breaker: deliveries resume at once."""
        target = await self._target(queue)
        return PushHealth(target, await self._breakers.reset(breaker_key(queue)))

    async def deliveries(self, queue: str) -> PushDeliveries | None:
        """The queue's deliveries of the last minute and hour and its breaker; None for
        a pulled queue."""
        target = await self._targets.get(queue)
        if target is None:
            return None
        rows = await self._repo.stats(queue)
        states = await self._breakers.states([target.breaker])
        stats = rows[0] if rows else PushStatsRow(queue, 0, 0, {}, {}, None, None)
        return PushDeliveries(target, stats, states[target.breaker])
