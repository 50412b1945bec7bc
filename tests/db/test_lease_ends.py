"""Where a lease's end is kept (migration 0020): in the job's row only, so that a heartbeat
extending it is a HOT update, and the reaper finds expired leases among the running jobs."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

from app.db.migrate import upgrade
from app.jobs import repository as jobs_sql
from app.maintenance import repository as maintenance_sql
from tests.conftest import _drop, _recreate, plain
from tests.db.test_database import _scans
from tests.db.test_migration_0016 import downgrade
from tests.statements import args_of

_INDEXES = "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'jobq.jobs'::regclass"


async def _running(db: asyncpg.Connection, count: int, expired: int = 0) -> None:
    """`count` running jobs in five queues, the first `expired` of them past their lease."""
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               lease_id, lease_expires_at, attempt, attempted_at)
        SELECT 'q' || g % 5, 't', '{}', 'running', 5, 60, gen_random_uuid(),
               now() + CASE WHEN g <= $2 THEN interval '-1 min' ELSE interval '1 min' END,
               1, now()
          FROM generate_series(1, $1) AS g
        """,
        count,
        expired,
    )


def _heartbeat(job: asyncpg.Record, extend_seconds: int) -> Sequence[Any]:
    return args_of(
        jobs_sql.HEARTBEAT,
        {
            "job_id": job["id"],
            "lease_id": job["lease_id"],
            "key_id": None,
            "extend_seconds": extend_seconds,
            "min_interval": 1.0,
            "has_progress": True,
            "percent": 50.0,
            "stage": "halfway",
            "message": None,
        },
    )


async def test_a_heartbeat_extending_a_lease_writes_no_index_entry(
    db: asyncpg.Connection,
) -> None:
    await _running(db, 3)
    job = await db.fetchrow("SELECT id, lease_id, lease_expires_at FROM jobq.jobs LIMIT 1")
    assert job is not None
    hot_updates = "SELECT pg_stat_get_xact_tuples_hot_updated('jobq.jobs'::regclass)"
    async with db.transaction():  # this transaction's counts
        (beat,) = await db.fetch(jobs_sql.HEARTBEAT.sql, *_heartbeat(job, 600))
        assert beat["written"] is True
        assert beat["lease_expires_at"] > job["lease_expires_at"]
        assert await db.fetchval(hot_updates) == 1
    stored = await db.fetchrow(
        "SELECT lease_expires_at, progress_stage FROM jobq.jobs WHERE id = $1", job["id"]
    )
    assert stored is not None
    assert (stored["lease_expires_at"], stored["progress_stage"]) == (
        beat["lease_expires_at"],
        "halfway",
    )


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
async def test_the_reaper_reads_only_the_running_jobs(db: asyncpg.Connection, mode: str) -> None:
    # A table in use: many finished jobs, a fleet of running ones.
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               finished_at)
        SELECT 'q', 't', '{}', 'succeeded', 5, 60, now() FROM generate_series(1, 20000)
        """
    )
    await _running(db, 2000)
    await db.execute("ANALYZE jobq.jobs")
    statement = maintenance_sql.REAP_EXPIRED
    values = {
        "batch_size": "100",
        "skip_ids": "'{}'",
        "only_id": "NULL",
        "backoff_base": "10",
        "backoff_cap": "60",
        "backoff_jitter": "0.1",
    }
    arguments = ", ".join(values[n] for n in statement.names)
    await db.execute(f"PREPARE reap AS {statement.sql}")
    try:
        await db.execute(f"SET plan_cache_mode = {mode}")
        explained = await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE reap({arguments})")
    finally:
        await db.execute("DEALLOCATE reap")
        await db.execute("RESET plan_cache_mode")
    plan = json.loads(explained)[0]["Plan"]
    jobs_scans = {
        (s["Node Type"], s.get("Index Name"))
        for s in _scans(plan)
        if s.get("Relation Name") == "jobs"
    }
    # the running jobs' index finds the expired; the update reaches each by primary key
    assert jobs_scans in (
        {("Index Scan", "jobs_running_idx"), ("Index Scan", "jobs_pkey")},
        {("Bitmap Heap Scan", None), ("Index Scan", "jobs_pkey")},
    ), plan
    bitmaps = [s for s in _scans(plan) if s["Node Type"] == "Bitmap Index Scan"]
    assert all(s["Index Name"] == "jobs_running_idx" for s in bitmaps), plan


async def test_the_reaper_returns_the_oldest_expired_leases_first(
    db: asyncpg.Connection,
) -> None:
    await _running(db, 50, expired=10)
    # the expired ones, by how long ago their lease ended
    await db.execute(
        "UPDATE jobq.jobs SET lease_expires_at = now() - make_interval(secs => id)"
        " WHERE lease_expires_at < now()"
    )
    arguments = args_of(
        maintenance_sql.REAP_EXPIRED,
        {
            "batch_size": 4,
            "skip_ids": [],
            "only_id": None,
            "backoff_base": 10.0,
            "backoff_cap": 60.0,
            "backoff_jitter": 0.1,
        },
    )
    reaped = await db.fetch(maintenance_sql.REAP_EXPIRED.sql, *arguments)
    assert sorted(r["id"] for r in reaped) == [7, 8, 9, 10]
    reaped = await db.fetch(maintenance_sql.REAP_EXPIRED.sql, *arguments)
    assert sorted(r["id"] for r in reaped) == [3, 4, 5, 6]
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE state = 'running'") == 42


async def test_migration_0020_goes_down_and_up_again(server_url: str) -> None:
    name = f"jobq_migration_0020_{os.getpid()}"
    url = await _recreate(server_url, name)  # at head
    conn = await asyncpg.connect(plain(url))

    async def has_the_index() -> bool:
        return "jobq.jobs_lease_expiry_idx" in [r[0] for r in await conn.fetch(_INDEXES)]

    try:
        assert not await has_the_index()
        await downgrade(url, "0019")
        assert await has_the_index()
        await upgrade(url)
        assert not await has_the_index()
    finally:
        await conn.close()
        await _drop(server_url, name)
