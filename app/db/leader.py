"""Leadership for work one replica does at a time (the reaper, retention, the scheduler):
a transaction-level advisory lock taken at the start of each batch's transaction, so a
replica that dies mid-batch holds nothing (its transaction rolls back)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg

from app.db.database import Database

MAINTENANCE_LOCK_KEY = 0x6A6F_6271_0002  # "jobq" + 2: held by the replica maintaining
# The lock, the database's clock, and no JIT compilation for the rest of the transaction:
# a batch is bounded by its size, but the planner prices one by its guesses about whole
# tables (never analysed, or millions of rows), and past `jit_above_cost` compiling the
# plan cost up to a second on every pass where running it took a millisecond.
TRY_LOCK = (
    "SELECT pg_try_advisory_xact_lock($1), extract(epoch FROM clock_timestamp()),"
    " set_config('jit', 'off', true)"
)
CLOCK = "SELECT extract(epoch FROM clock_timestamp())"


@asynccontextmanager
async def as_leader(
    db: Database, key: int = MAINTENANCE_LOCK_KEY
) -> AsyncIterator[tuple[asyncpg.Connection, float] | None]:
    """A transaction holding the lock, and when it was taken (the database's clock, epoch
    seconds); None when another replica holds it."""
    async with db.transaction() as conn:
        row = await conn.fetchrow(TRY_LOCK, key)
        assert row is not None
        leader, started, _jit = row
        yield (conn, float(started)) if leader else None


async def clock(conn: asyncpg.Connection) -> float:
    """The database's clock, which every replica shares (epoch seconds)."""
    return float(await conn.fetchval(CLOCK))


async def prune_in_batches(
    prune_batch: Callable[[int], Awaitable[int | None]], batch_size: int
) -> int | None:
    """Run `prune_batch(batch_size)` (rows deleted as the leader, None when another
    replica leads) until a batch comes back short; the rows deleted, None when another
    replica led from the start or took over midway having deleted none here."""
    total = 0
    while True:
        pruned = await prune_batch(batch_size)
        if pruned is None:
            return total or None  # another replica took over midway
        total += pruned
        if pruned < batch_size:
            return total
