"""The statistics' reads and upkeep are planned without JIT compilation. Reads (migration
0031): the planner's guess for `jobq.queue_overview`'s probes passes `jit_above_cost` on
any table, and compiling cost 20 times what the statement does; a `CREATE OR REPLACE` of
the function without its `SET jit = off` clause drops the setting: this fails then.
Upkeep: the maintenance leader's transactions (the fold of the deltas among them, which
compiled for a second a pass while running for a millisecond)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from app.db.database import Database
from app.db.engine import create_engine
from app.db.leader import as_leader


async def test_queue_overview_runs_without_jit(db: asyncpg.Connection) -> None:
    config = await db.fetchval(
        "SELECT proconfig FROM pg_proc WHERE oid = 'jobq.queue_overview(text)'::regprocedure"
    )
    assert config is not None and "jit=off" in config


async def test_queue_overview_keeps_the_session_setting(db: asyncpg.Connection) -> None:
    await db.execute("SET jit = on")
    await db.fetch("SELECT * FROM jobq.queue_overview(NULL)")
    assert await db.fetchval("SHOW jit") == "on"


@pytest.fixture
async def database(database_url: str, db: asyncpg.Connection) -> AsyncIterator[Database]:
    engine = create_engine(database_url, 1)  # one connection: the same after
    yield Database(engine)
    await engine.dispose()


async def test_the_leaders_transactions_run_without_jit(database: Database) -> None:
    async with as_leader(database) as leading:
        assert leading is not None
        conn, _started = leading
        assert await conn.fetchval("SHOW jit") == "off"
    async with database.connection() as conn:  # for that transaction only
        default = "SELECT reset_val FROM pg_settings WHERE name = 'jit'"
        assert await conn.fetchval("SHOW jit") == await conn.fetchval(default)
