"""A pushed queue's health as operators see it: its target and its circuit breaker
(the one every replica reads, in PostgreSQL), and the breaker's manual reset."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import NotFound
from app.delivery import Breakers, BreakerState
from app.push.service.targets import PushTarget, PushTargets, breaker_key


@dataclass(frozen=True, slots=True)
class PushHealth:
    target: PushTarget
    breaker: BreakerState


class PushHealthService:
    """Read a pushed queue's target and breaker; close the breaker."""

    def __init__(self, targets: PushTargets, breakers: Breakers) -> None:
        self._targets = targets
        self._breakers = breakers

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
