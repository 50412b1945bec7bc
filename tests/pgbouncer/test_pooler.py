"""What running behind PgBouncer asks of jobq, shown on the real thing: the pooler shares
its server connections between clients, so statements cached by name collide; jobq's
pool caches none when a direct URL is set; `jobq serve` migrates, serves, long-polls
and reaps through it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import NamedTuple

import asyncpg
import httpx
import pytest

from app.db.database import Database
from app.db.engine import create_engine
from app.db.statement import compile_sql
from tests.conftest import plain
from tests.fixtures.pgbouncer import SERVER_CONNECTIONS
from tests.processes.replicas import Replica


class Numbered(NamedTuple):
    n: int


BACKEND = compile_sql("backend", "SELECT pg_backend_pid() AS pid, CAST(:n AS int) AS n").bound(
    Numbered
)


async def test_the_pooler_shares_its_server_connections(pgbouncer_url: str) -> None:
    clients = [
        await asyncpg.connect(plain(pgbouncer_url), statement_cache_size=0) for _ in range(6)
    ]
    try:
        pids = {await client.fetchval("SELECT pg_backend_pid()") for client in clients}
    finally:
        for client in clients:
            await client.close()
    assert 1 <= len(pids) <= SERVER_CONNECTIONS  # six clients, open at once, on at most two


async def test_a_statement_cached_by_name_goes_missing_through_the_pooler(
    pgbouncer_url: str,
) -> None:
    cached = await asyncpg.connect(plain(pgbouncer_url))
    other = await asyncpg.connect(plain(pgbouncer_url), statement_cache_size=0)
    try:
        await cached.fetchval("SELECT 1")  # prepared by name on the server it got
        async with other.transaction():  # that server, busy elsewhere: the next is another
            await other.fetchval("SELECT 1")
            with pytest.raises(asyncpg.InvalidSQLStatementNameError):
                await cached.fetchval("SELECT 1")
    finally:
        await cached.close()
        await other.close()


async def test_a_pool_made_for_the_pooler_caches_nothing(pgbouncer_url: str) -> None:
    engines = [create_engine(pgbouncer_url, 4, pooler=True) for _ in range(3)]
    try:
        dbs = [Database(engine) for engine in engines]
        rows = await asyncio.gather(
            *(dbs[n % 3].fetch_one(BACKEND, Numbered(n)) for n in range(300))
        )
        assert [row["n"] for row in rows if row is not None] == list(range(300))
        assert len({row["pid"] for row in rows if row is not None}) <= SERVER_CONNECTIONS
        async with dbs[0].transaction() as conn:  # a transaction keeps its server connection
            first = await conn.fetchval("SELECT pg_backend_pid()")
            await asyncio.gather(*(dbs[1].fetch_one(BACKEND, Numbered(n)) for n in range(20)))
            assert await conn.fetchval("SELECT pg_backend_pid()") == first
    finally:
        for engine in engines:
            await engine.dispose()


async def test_jobq_serve_behind_the_pooler(
    database_url: str, pgbouncer_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    replica = Replica(
        pgbouncer_url,
        tmp_path / "serve.log",
        JOBQ_DATABASE_DIRECT_URL=database_url,
        JOBQ_LONGPOLL_RECHECK_SECONDS="30",
        JOBQ_LONGPOLL_POLL_SECONDS="30",
        JOBQ_REAPER_INTERVAL_SECONDS="0.2",
    )
    try:
        async with httpx.AsyncClient(base_url=replica.url, timeout=30) as client:
            waiting = asyncio.create_task(
                client.post(
                    "/v1/leases",
                    json={"queues": ["q"], "worker_id": "w", "wait_seconds": 20},
                )
            )
            await asyncio.sleep(0.5)  # the lease is waiting
            started = time.monotonic()
            job = (await client.post("/v1/queues/q/jobs", json={"type": "t"})).json()
            (leased,) = (await waiting).json()["leases"]
            assert leased["job"]["id"] == job["id"]
            assert time.monotonic() - started < 5  # woken by NOTIFY, not a 30-s re-check

            await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second'")
            for _ in range(100):  # the reaper, as maintenance leader, takes it back
                if (await client.get(f"/v1/jobs/{job['id']}")).json()["state"] == "queued":
                    break
                await asyncio.sleep(0.1)
            reaped = (await client.get(f"/v1/jobs/{job['id']}")).json()
            assert reaped["state"] == "queued"
            assert reaped["last_error"]["type"] == "lease_expired"
    finally:
        replica.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "prepared statement" not in log and "Traceback" not in log, log[-3000:]
