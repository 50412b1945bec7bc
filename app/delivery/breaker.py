"""A circuit breaker per delivery target, kept in PostgreSQL so that every replica sees
what any of them learnt.

A target is named by a key its owner chooses, unique across owners: `queue:<name>` for
a queue's push target, `subscription:<id>` for an event subscription. After
`failures` consecutive failed deliveries (`JOBQ_PUSH_BREAKER_FAILURES`), the breaker
opens: deliveries to the target wait `pause_seconds`, doubled at each trip without a
success in between, at most `max_pause_seconds`. When the pause is over deliveries
resume; one more failure opens it again for twice as long, a success closes it and
forgets the trips. An operator may close it at once (`reset`).

    breakers = Breakers.from_settings(DeliveryRepository(db), settings)
    states = await breakers.states(["queue:emails"])   # {key: BreakerState}, one query
    if not states["queue:emails"].open: ...deliver...
    await breakers.record("queue:emails", attempt_ok, error="5xx: upstream down")
    await breakers.reset("queue:emails")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.core.config import Settings
from app.delivery.params import BreakerFailedParams
from app.delivery.repository import DeliveryRepository
from app.delivery.rows import BreakerRow

MAX_ERROR_CHARS = 512  # of a failure, kept as the breaker's last error


@dataclass(frozen=True, slots=True)
class BreakerState:
    """A target's breaker as an operator sees it."""

    target: str
    failures: int = 0
    trips: int = 0
    open_until: datetime | None = None
    failed_at: datetime | None = None
    last_error: str | None = None

    @property
    def open(self) -> bool:
        """Whether deliveries to the target wait now."""
        return self.open_until is not None and self.open_until > datetime.now(UTC)

    @property
    def state(self) -> str:
        """`closed`, `open` (deliveries wait), or `half_open` (a pause is over, the next
        failure opens it again)."""
        if self.open:
            return "open"
        return "half_open" if self.trips else "closed"

    @classmethod
    def of(cls, row: BreakerRow) -> BreakerState:
        return cls(*row)


class Breakers:
    """The breakers of all targets, with the thresholds of the settings."""

    def __init__(
        self,
        repository: DeliveryRepository,
        *,
        failures: int,
        pause_seconds: float,
        max_pause_seconds: float,
    ) -> None:
        self._repository = repository
        self.failures = failures
        self.pause_seconds = pause_seconds
        self.max_pause_seconds = max_pause_seconds

    @classmethod
    def from_settings(cls, repository: DeliveryRepository, settings: Settings) -> Breakers:
        return cls(
            repository,
            failures=settings.push_breaker_failures,
            pause_seconds=settings.push_breaker_pause_seconds,
            max_pause_seconds=settings.push_breaker_max_pause_seconds,
        )

    async def record(self, target: str, ok: bool, *, error: str = "") -> BreakerState | None:
        """Count a delivery's outcome; after a failure, the breaker as it is now."""
        if ok:
            await self._repository.succeeded(target)
            return None
        row = await self._repository.failed(
            BreakerFailedParams(
                target=target,
                error=error[:MAX_ERROR_CHARS],
                threshold=self.failures,
                pause_seconds=self.pause_seconds,
                max_pause_seconds=self.max_pause_seconds,
            )
        )
        return BreakerState.of(row)

    async def reset(self, target: str) -> BreakerState:
        """Close the target's breaker (an operator's action)."""
        row = await self._repository.reset(target)
        return BreakerState(target) if row is None else BreakerState.of(row)

    async def states(self, targets: Sequence[str]) -> dict[str, BreakerState]:
        """Each target's breaker (closed for one that never failed), in one query."""
        found = {
            row.target: BreakerState.of(row) for row in await self._repository.breakers(targets)
        }
        return {target: found.get(target, BreakerState(target)) for target in targets}
