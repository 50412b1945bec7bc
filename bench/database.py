"""The benchmark's database: where it is, made afresh, filled, inspected.

Administrative work runs on short-lived asyncpg connections of this (orchestrating)
process; load runs in the generator processes (`bench.load`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import psutil

from app.core.config import Settings
from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import with_database
from bench.floor_whole import WIDE_SCHEMA, WIDE_TABLE

DEFAULT_DATABASE = "jobq_bench"
FILL_CHUNK_ROWS = 250_000

BARE_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_bare (
    id      bigserial PRIMARY KEY,
    state   smallint NOT NULL DEFAULT 0,
    payload jsonb
);
CREATE INDEX IF NOT EXISTS bench_bare_queued_idx ON bench_bare (id) WHERE state = 0;
"""
"""The bare reference's minimal job table: 0 queued, 1 running, 2 done."""

# One job inserted and announced in one statement (its commit delivers the NOTIFY): the
# bare latency loop's enqueue and the framework floor's when it long-polls.
BARE_DUE_CHANNEL = "bench_bare_due"
BARE_INSERT_NOTIFY = f"""
WITH inserted AS (INSERT INTO bench_bare (payload) VALUES ($1::jsonb) RETURNING id)
SELECT id, pg_notify('{BARE_DUE_CHANNEL}', '') FROM inserted
"""


def dsn(url: str) -> str:
    """The URL as asyncpg takes it (no SQLAlchemy driver name)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@dataclass(frozen=True)
class Server:
    url: str  # any database on the server
    mode: Literal["server", "embedded"]


def resolve_server(database_url: str | None) -> Server:
    """`--database-url`, else `JOBQ_DATABASE_URL`, else the embedded server (started here)."""
    url = database_url or os.environ.get("JOBQ_DATABASE_URL")
    if url:
        return Server(url, "server")
    return Server(embedded.start(Settings().data_dir), "embedded")


@contextlib.asynccontextmanager
async def connect(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(dsn(url))
    try:
        yield conn
    finally:
        await conn.close()


async def recreate(server_url: str, name: str) -> str:
    """Drop and create database `name`, apply jobq's migrations; returns its URL."""
    async with connect(with_database(server_url, "postgres")) as conn:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {quote_ident(name)}")
    url = with_database(server_url, name)
    await upgrade(url)
    async with connect(url) as conn:
        await conn.execute(BARE_SCHEMA)
    return url


async def drop(server_url: str, name: str) -> None:
    async with connect(with_database(server_url, "postgres")) as conn:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")


def _postmaster_of(backend_pid: int) -> int | None:
    """The postmaster of a backend of ours, if the server runs on this machine."""
    try:
        parent = psutil.Process(backend_pid).parent()
    except psutil.Error:
        return None
    if parent is None or "postgres" not in parent.name():
        return None
    return parent.pid


async def server_info(url: str) -> dict[str, Any]:
    """Version, chosen settings and (when local) the postmaster's pid."""
    async with connect(url) as conn:
        version = await conn.fetchval("SHOW server_version")
        settings = {
            name: await conn.fetchval(f"SHOW {name}")
            for name in (
                "shared_buffers",
                "max_connections",
                "synchronous_commit",
                "fsync",
                "wal_level",
                "max_wal_size",
                "work_mem",
            )
        }
        # asked while our backend is alive: its parent is the postmaster
        postmaster = _postmaster_of(await conn.fetchval("SELECT pg_backend_pid()"))
    return {"version": version, "settings": settings, "postmaster_pid": postmaster}


async def reset_jobs(url: str) -> None:
    """Empty jobq's table, then checkpoint, so each scenario starts from the same state."""
    async with connect(url) as conn:
        await conn.execute("TRUNCATE jobq.jobs RESTART IDENTITY")
        await _checkpoint(conn)


async def _checkpoint(conn: asyncpg.Connection) -> None:
    # superuser (or pg_checkpoint) only; without it, scenarios are a little noisier
    with contextlib.suppress(asyncpg.InsufficientPrivilegeError):
        await conn.execute("CHECKPOINT")


async def vacuum_analyze(url: str, table: str = "jobq.jobs") -> None:
    async with connect(url) as conn:
        await conn.execute(f"VACUUM (ANALYZE) {table}")
        await _checkpoint(conn)


async def sample_running(url: str, queue: str, every: float, stop: threading.Event) -> list[int]:
    """The queue's running jobs, read every `every` seconds while it has due jobs."""
    samples: list[int] = []
    async with connect(url) as conn:
        while not stop.is_set():
            row = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE state = 'running') AS running,"
                "       count(*) FILTER (WHERE state = 'queued') AS queued"
                "  FROM jobq.jobs WHERE queue = $1 AND state IN ('running', 'queued')",
                queue,
            )
            assert row is not None
            if row["queued"] > 0:
                samples.append(row["running"])
            await asyncio.sleep(every)
    return samples


async def job_states(url: str, table: str = "jobq.jobs") -> dict[str, int]:
    """Jobs per state in jobq's table (or `bench_wide`, which has its columns)."""
    async with connect(url) as conn:
        rows = await conn.fetch(f"SELECT state::text, count(*) FROM {table} GROUP BY state")
    return {row[0]: row[1] for row in rows}


async def delete_unfinished(url: str) -> None:
    async with connect(url) as conn:
        await conn.execute("DELETE FROM jobq.jobs WHERE finished_at IS NULL")


async def fill_finished(
    url: str, queue: str, count: int, progress: Callable[[int], None] | None = None
) -> None:
    """Add `count` succeeded jobs to `queue`, finished within the last hours.

    Shaped like jobs jobq finished (payload, result, one attempt), recent enough that
    retention (a day by default) leaves them alone during the run.
    """
    async with connect(url) as conn:
        await conn.execute("SET synchronous_commit = off")
        done = 0
        while done < count:
            chunk = min(FILL_CHUNK_ROWS, count - done)
            await conn.execute(
                """
                INSERT INTO jobq.jobs (queue, type, payload, state, run_at, attempt,
                                       max_attempts, lease_seconds, lease_id,
                                       current_lease_seconds, attempted_at, result, attempts,
                                       created_at, started_at, finished_at, updated_at)
                SELECT $1, 'bench', jsonb_build_object('i', g), 'succeeded', t.at, 1, 5, 60,
                       gen_random_uuid(), 60, t.at, '{"ok": true}',
                       jsonb_build_array(jsonb_build_object(
                           'attempt', 1, 'worker_id', 'bench-fill', 'started_at', t.at,
                           'finished_at', t.at, 'outcome', 'succeeded', 'error', NULL)),
                       t.at, t.at, t.at, t.at
                  FROM generate_series(1, $2) AS g,
                       LATERAL (SELECT now() - make_interval(secs => 3600 + g * 0.001)) AS t(at)
                """,
                queue,
                chunk,
            )
            done += chunk
            if progress is not None:
                progress(done)


async def prepare_bare(url: str, rows: int) -> None:
    """Empty the bare table and queue `rows` jobs in it (none for the insert variant)."""
    async with connect(url) as conn:
        await conn.execute("TRUNCATE bench_bare RESTART IDENTITY")
        if rows:
            await conn.execute(
                "INSERT INTO bench_bare (payload) "
                "SELECT jsonb_build_object('i', g) FROM generate_series(1, $1) AS g",
                rows,
            )
        await conn.execute("VACUUM (ANALYZE) bench_bare")
        await _checkpoint(conn)


async def queue_jobs(url: str, queue: str, count: int, table: str = "jobq.jobs") -> None:
    """Empty jobq's table (or `bench_wide`, which has its columns) and queue `count` jobs
    straight in SQL."""
    async with connect(url) as conn:
        await conn.execute(f"TRUNCATE {table} RESTART IDENTITY")
        await conn.execute(
            f"""
            INSERT INTO {table} (queue, type, payload, max_attempts, lease_seconds)
            SELECT $1, 'bench', jsonb_build_object('i', g), 5, 60
              FROM generate_series(1, $2) AS g
            """,
            queue,
            count,
        )
        await conn.execute(f"VACUUM (ANALYZE) {table}")
        await _checkpoint(conn)


async def prepare_wide(url: str, queue: str = "", rows: int = 0) -> None:
    """The table shaped like jobq's (`bench.floor_whole`), made if need be, emptied, and
    `rows` jobs queued in `queue` in it."""
    async with connect(url) as conn:
        await conn.execute(WIDE_SCHEMA)
    await queue_jobs(url, queue, rows, WIDE_TABLE)


async def bare_states(url: str) -> dict[int, int]:
    async with connect(url) as conn:
        rows = await conn.fetch("SELECT state, count(*) FROM bench_bare GROUP BY state")
    return {row[0]: row[1] for row in rows}
