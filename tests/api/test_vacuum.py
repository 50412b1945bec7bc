"""Vacuum where autovacuum will not: the leader vacuums jobq's tables past a threshold."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from fastapi import FastAPI

from app.maintenance import MAINTENANCE_LOCK_KEY, MaintenanceRepository, Vacuumer
from tests.conftest import plain

DEAD = 3000


async def _stats(conn: asyncpg.Connection) -> asyncpg.Record:
    row = await conn.fetchrow(
        "SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables"
        " WHERE relid = 'jobq.jobs'::regclass"
    )
    assert row is not None
    return row


async def _until(
    conn: asyncpg.Connection, name: str, above: int, seconds: float = 10
) -> asyncpg.Record:
    """Poll the table's statistics (reported asynchronously) until `name` passes `above`."""
    for _ in range(int(seconds / 0.1)):
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await _stats(conn)
        if row[name] > above:
            return row
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never passed {above}: {dict(row)}")


@pytest.fixture
async def no_autovacuum(db: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """The jobs table with autovacuum off for it (the server's may be on)."""
    await db.execute("ALTER TABLE jobq.jobs SET (autovacuum_enabled = false)")
    try:
        yield db
    finally:
        await db.execute("ALTER TABLE jobq.jobs RESET (autovacuum_enabled)")


@pytest.fixture
async def watcher(
    no_autovacuum: asyncpg.Connection, database_url: str
) -> AsyncIterator[asyncpg.Connection]:
    """`DEAD` deleted jobs, reported; a connection of its own to watch the statistics."""
    db = no_autovacuum
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 5, 60 FROM generate_series(1, $1)",
        DEAD,
    )
    await db.execute("DELETE FROM jobq.jobs")
    await db.execute("SELECT pg_stat_force_next_flush()")
    await db.execute("SELECT 1")  # the flush happens once the connection goes idle
    conn: asyncpg.Connection = await asyncpg.connect(plain(database_url))
    try:
        await _until(conn, "n_dead_tup", DEAD - 1)
        yield conn
    finally:
        await conn.close()


async def test_dead_rows_autovacuum_leaves_are_vacuumed(
    app: FastAPI, client: object, watcher: asyncpg.Connection
) -> None:
    before = await _stats(watcher)
    vacuumer: Vacuumer = app.state.services.vacuumer
    result = await vacuumer.run_once()
    assert result.leader and "jobq.jobs" in result.tables
    after = await _until(watcher, "vacuum_count", before["vacuum_count"])
    assert after["n_dead_tup"] < DEAD


async def test_tables_under_the_threshold_are_left_alone(
    app: FastAPI, client: object, watcher: asyncpg.Connection
) -> None:
    before = await _stats(watcher)
    repo: MaintenanceRepository = app.state.services.vacuumer._repo
    patient = Vacuumer(repo, interval_seconds=30, min_dead=10 * DEAD)
    assert (await patient.run_once()).tables == []
    assert (await _stats(watcher))["vacuum_count"] == before["vacuum_count"]


async def test_only_the_leader_vacuums(
    app: FastAPI, client: object, watcher: asyncpg.Connection
) -> None:
    await watcher.execute("SELECT pg_advisory_lock($1)", MAINTENANCE_LOCK_KEY)
    result = await app.state.services.vacuumer.run_once()
    assert not result.leader and result.tables == []
