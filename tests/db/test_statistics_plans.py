"""The statistics' reads are planned without JIT compilation (migration 0031): the
planner's guess for `jobq.queue_overview`'s probes passes `jit_above_cost` on any
table, and compiling cost 20 times what the statement does. A `CREATE OR REPLACE` of
the function without its `SET jit = off` clause drops the setting: this fails then."""

from __future__ import annotations

import asyncpg


async def test_queue_overview_runs_without_jit(db: asyncpg.Connection) -> None:
    config = await db.fetchval(
        "SELECT proconfig FROM pg_proc WHERE oid = 'jobq.queue_overview(text)'::regprocedure"
    )
    assert config is not None and "jit=off" in config


async def test_queue_overview_keeps_the_session_setting(db: asyncpg.Connection) -> None:
    await db.execute("SET jit = on")
    await db.fetch("SELECT * FROM jobq.queue_overview(NULL)")
    assert await db.fetchval("SHOW jit") == "on"
