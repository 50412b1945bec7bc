"""The benchmark's database: where it is, made afresh, filled, inspected.

Administrative work runs on short-lived asyncpg connections of this (orchestrating)
process; load runs in the generator processes (`bench.load`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import psutil

from app.core.config import Settings
from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import with_database

DEFAULT_DATABASE = "jobq_bench"

BARE_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_bare (
    id      bigserial PRIMARY KEY,
    state   smallint NOT NULL DEFAULT 0,
    payload jsonb
);
CREATE INDEX IF NOT EXISTS bench_bare_queued_idx ON bench_bare (id) WHERE state = 0;
"""
"""The framework floor's minimal job table: 0 queued, 1 running, 2 done."""

# One job inserted and announced in one statement (its commit delivers the NOTIFY): the
# framework floor's enqueue when its workers long-poll.
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
        await conn.execute(f"VACUUM (ANALYZE) {table}")  # a table of jobq's, never input
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


async def job_states(url: str) -> dict[str, int]:
    """Jobs per state in jobq's table."""
    async with connect(url) as conn:
        rows = await conn.fetch("SELECT state::text, count(*) FROM jobq.jobs GROUP BY state")
    return {row[0]: row[1] for row in rows}


async def prepare_bare(url: str, rows: int) -> None:
    """Empty the floor's table and queue `rows` jobs in it."""
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


async def queue_jobs(url: str, queue: str, count: int) -> None:
    """Empty jobq's table and queue `count` jobs straight in SQL."""
    async with connect(url) as conn:
        await conn.execute("TRUNCATE jobq.jobs RESTART IDENTITY")
        await conn.execute(
            """
            INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)
            SELECT $1, 'bench', jsonb_build_object('i', g), 5, 60
              FROM generate_series(1, $2) AS g
            """,
            queue,
            count,
        )
        await conn.execute("VACUUM (ANALYZE) jobq.jobs")
        await _checkpoint(conn)


async def bare_states(url: str) -> dict[int, int]:
    async with connect(url) as conn:
        rows = await conn.fetch("SELECT state, count(*) FROM bench_bare GROUP BY state")
    return {row[0]: row[1] for row in rows}


async def queue_keyed_jobs(url: str, queue: str, count: int, keys: list[str]) -> None:
    """Empty jobq's table (and fair queues' keys), then queue `count` jobs straight in
    SQL, their fairness keys taken from `keys` in turn."""
    async with connect(url) as conn:
        await conn.execute("TRUNCATE jobq.jobs, jobq.fair_keys RESTART IDENTITY")
        await conn.execute(
            """
            INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds,
                                   fairness_key)
            SELECT $1, 'bench', jsonb_build_object('i', g), 5, 60,
                   ($3::text[])[1 + g % cardinality($3::text[])]
              FROM generate_series(1, $2) AS g
            """,
            queue,
            count,
            keys,
        )
        await conn.execute("VACUUM (ANALYZE) jobq.jobs")
        await _checkpoint(conn)


async def lease_waits_ms(url: str, queue: str, keys: list[str]) -> list[float]:
    """Enqueue-to-lease of the queue's leased jobs of these keys, in milliseconds."""
    async with connect(url) as conn:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM attempted_at - created_at) * 1000 AS ms"
            "  FROM jobq.jobs WHERE queue = $1 AND fairness_key = ANY($2::text[])"
            "   AND attempted_at IS NOT NULL",
            queue,
            keys,
        )
    return [float(row["ms"]) for row in rows]
