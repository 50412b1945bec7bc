"""`Database.connection` takes connections from SQLAlchemy's pool and always gives them
back: after a statement, a bad statement, a cancellation mid-statement, and a
connection that broke (which the pool replaces)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from app.core.errors import DatabaseUnavailable
from app.db.database import Database
from app.db.engine import create_engine


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    engine = create_engine(database_url, 2)
    try:
        yield Database(engine)
    finally:
        await engine.dispose()


def _checked_out(database: Database) -> int:
    return int(database.engine.pool.checkedout())  # type: ignore[attr-defined]


async def _backend(database: Database) -> int:
    async with database.connection() as conn:
        pid: int = await conn.fetchval("SELECT pg_backend_pid()")
        return pid


async def test_a_connection_goes_back_after_a_statement_and_after_a_bad_one(
    database: Database,
) -> None:
    first = await _backend(database)
    assert _checked_out(database) == 0
    with pytest.raises(asyncpg.UndefinedTableError):
        async with database.connection() as conn:
            await conn.execute("SELECT * FROM no_such_table")
    assert _checked_out(database) == 0
    assert await _backend(database) == first  # the same connection, reused


async def test_a_cancelled_statement_leaves_the_pool_whole(database: Database) -> None:
    started = asyncio.Event()

    async def slow() -> None:
        async with database.connection() as conn:
            started.set()
            await conn.execute("SELECT pg_sleep(30)")

    task = asyncio.create_task(slow())
    await started.wait()
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _checked_out(database) == 0
    # the pool hands out working connections again, at once (the sleep was cancelled)
    answers = await asyncio.wait_for(
        asyncio.gather(*(_backend(database) for _ in range(4))), timeout=10
    )
    assert all(answers)
    async with database.transaction() as conn:
        assert await conn.fetchval("SELECT 1") == 1


async def test_overflow_connections_are_closed_when_they_go_back(database: Database) -> None:
    # the pool keeps 2: of 4 held at once, the 2 overflow ones are closed on their return
    # (where the adapter may wait), the others go back to the pool's queue
    held = asyncio.Event()
    drivers: list[asyncpg.Connection] = []

    async def hold() -> None:
        async with database.connection() as conn:
            drivers.append(conn)
            await conn.fetchval("SELECT 1")
            if len(drivers) == 4:
                held.set()
            await held.wait()

    await asyncio.wait_for(asyncio.gather(*(hold() for _ in range(4))), timeout=10)
    assert _checked_out(database) == 0
    assert database.engine.pool.checkedin() == 2  # type: ignore[attr-defined]
    assert sorted(d.is_closed() for d in drivers) == [False, False, True, True]
    assert await _backend(database)  # the kept ones still answer


async def test_a_broken_connection_is_replaced(database: Database, db: asyncpg.Connection) -> None:
    victim = await _backend(database)
    await db.execute("SELECT pg_terminate_backend($1)", victim)
    await asyncio.sleep(0.1)
    with pytest.raises(DatabaseUnavailable):
        async with database.connection() as conn:
            await conn.fetchval("SELECT 1")
    assert _checked_out(database) == 0
    assert await _backend(database) != victim


async def test_a_connection_keeps_as_many_statements_prepared_as_jobq_runs(
    database: Database,
) -> None:
    # ~60 named statements and a lease from one queue per batch size up to 100: asyncpg's
    # default cache (100) would close the oldest, to be prepared and planned afresh
    async with database.connection() as conn:
        for n in range(200):
            assert await conn.fetchval(f"SELECT $1::int + {n}", 1) == n + 1
        prepared = await conn.fetchval("SELECT count(*) FROM pg_prepared_statements")
    assert prepared >= 200
