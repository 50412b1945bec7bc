"""Runs the delivery's named SQL (`queries.sql`: the targets' circuit breakers) and
hands back typed rows. Knows no rules: the thresholds come from `app.delivery.breaker`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.db.database import Database
from app.db.statement import Queries
from app.delivery.params import BreakerFailedParams, ByTarget, ByTargets
from app.delivery.rows import BreakerRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
BREAKER_ADD = QUERIES.bind("breaker_add", ByTarget)
BREAKER_FAILED = QUERIES.bind("breaker_failed", BreakerFailedParams)
BREAKER_SUCCEEDED = QUERIES.bind("breaker_succeeded", ByTarget)
BREAKER_RESET = QUERIES.bind("breaker_reset", ByTarget)
BREAKERS = QUERIES.bind("breakers", ByTargets)


class DeliveryRepository:
    """The targets' circuit breakers in `jobq.delivery_breakers`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def failed(self, params: BreakerFailedParams) -> BreakerRow:
        """Count a failure of `params.target` (its row made first if it has none)."""
        record = await self._db.fetch_one(BREAKER_FAILED, params)
        if record is None:
            await self._db.fetch(BREAKER_ADD, ByTarget(params.target))
            record = await self._db.fetch_one(BREAKER_FAILED, params)
        assert record is not None  # the row exists now: rows are never deleted here
        return BreakerRow(*record)

    async def succeeded(self, target: str) -> None:
        await self._db.fetch(BREAKER_SUCCEEDED, ByTarget(target))

    async def reset(self, target: str) -> BreakerRow | None:
        """The target's breaker, closed; None if it never failed."""
        record = await self._db.fetch_one(BREAKER_RESET, ByTarget(target))
        return None if record is None else BreakerRow(*record)

    async def breakers(self, targets: Sequence[str]) -> list[BreakerRow]:
        return [BreakerRow(*r) for r in await self._db.fetch(BREAKERS, ByTargets(list(targets)))]
