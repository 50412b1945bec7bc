"""The bare loops: SKIP LOCKED straight on asyncpg, no HTTP, on a minimal table (what the
database allows), and jobq's own statements the same way."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from bench import floor_whole
from bench.database import BARE_DUE_CHANNEL, BARE_INSERT_NOTIFY
from bench.generators import EMPTY_LEASES_BEFORE_DONE, Load, LoadError, split

BARE_CLAIM = """
WITH claimed AS (
    SELECT id FROM bench_bare WHERE state = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE bench_bare b SET state = 1 FROM claimed WHERE b.id = claimed.id
RETURNING b.id, b.payload
"""
BARE_FINISH_MANY = "UPDATE bench_bare SET state = 2 WHERE id = ANY($1::bigint[])"
BARE_FINISH_ONE = "UPDATE bench_bare SET state = 2 WHERE id = $1"
BARE_INSERT = "INSERT INTO bench_bare (payload) VALUES ($1::jsonb) RETURNING id"


def jobq_statement(name: str) -> tuple[str, tuple[str, ...]]:
    """One of jobq's named statements as asyncpg runs it: SQL with $n, parameter names."""
    from app.jobs import repository

    statement = getattr(repository, name)
    return statement.sql, statement.names


def jobq_lease(max_jobs: int) -> tuple[str, tuple[str, ...]]:
    """jobq's lease of `max_jobs` from one queue, as the service runs it (`jobq_statement`)."""
    from app.jobs import repository

    statement = repository.lease_statement(["one queue"], max_jobs)
    return statement.sql, statement.names


class Bare(Load):
    """SKIP LOCKED loops straight on asyncpg, no HTTP; each statement commits on its own.

    Modes, each of `connections` connections running its own loop:
    - `claim`: the bare claim loop, claiming `batch` jobs per statement from the minimal
      table until it is empty (the reference for what the database allows);
    - `claim_finish`: the same, then one statement marks the claimed jobs done;
    - `insert`: insert one job, claim one, mark it done (jobq's single path, bare);
    - `jobq_sql`: jobq's own lease and COMPLETE_MANY statements on its table (every job
      completed), as the service runs them minus HTTP, FastAPI and SQLAlchemy;
    - `wide_sql`: the minimal claim and fenced finish of `bench.floor_whole` on its table
      shaped like jobq's: what jobq's row and answer cost without jobq's logic.
    """

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.connections: list[asyncpg.Connection] = []
        for _ in range(int(self.params["connections"])):
            conn = await asyncpg.connect(self.params["dsn"])
            stack.push_async_callback(conn.close)
            await conn.execute("SELECT 1")
            self.connections.append(conn)

    async def run(self) -> dict[str, Any]:
        batch, mode = int(self.params["batch"]), self.params["mode"]
        counts = {"jobs": 0, "statements": 0}
        last = 0.0

        async def claim_loop(
            claim: Callable[[], Awaitable[list[asyncpg.Record]]],
            finish: Callable[[list[asyncpg.Record]], Awaitable[None]] | None,
        ) -> None:
            """Claim until the table is empty, finishing each claim when asked to."""
            nonlocal last
            empty = 0
            while empty < EMPTY_LEASES_BEFORE_DONE:
                rows = await claim()
                counts["statements"] += 1
                if not rows:
                    empty += 1
                    await asyncio.sleep(0.005)
                    continue
                empty = 0
                if finish is not None:
                    await finish(rows)
                    counts["statements"] += 1
                counts["jobs"] += len(rows)
                last = time.time()

        def bare(conn: asyncpg.Connection) -> Awaitable[None]:
            async def finish(rows: list[asyncpg.Record]) -> None:
                if batch == 1:
                    await conn.execute(BARE_FINISH_ONE, rows[0]["id"])
                else:
                    await conn.execute(BARE_FINISH_MANY, [row["id"] for row in rows])

            return claim_loop(
                lambda: conn.fetch(BARE_CLAIM, batch), finish if mode == "claim_finish" else None
            )

        lease_sql, lease_names = jobq_lease(batch)
        # every ack a complete: the statement the service runs for such a batch
        finish_sql, finish_names = jobq_statement("COMPLETE_MANY")

        def jobq_sql(conn: asyncpg.Connection, number: int) -> Awaitable[None]:
            lease = {
                "queue": self.params["queue"],
                "queues": [self.params["queue"]],
                "types": [],
                "max_jobs": batch,
                "lease_seconds": None,
                "worker_id": f"bench-sql-{number}",
                "key_id": None,  # no API key: authentication is off
            }

            async def finish(rows: list[asyncpg.Record]) -> None:
                params = {
                    "job_ids": [row["id"] for row in rows],
                    "lease_ids": [row["lease_id"] for row in rows],
                    "results": [None] * len(rows),
                    "key_id": None,
                }
                done = await conn.fetch(finish_sql, *(params[n] for n in finish_names))
                if len(done) != len(rows):
                    raise LoadError(f"FINISH matched {len(done)} of {len(rows)} leases")

            args = [lease[n] for n in lease_names]
            return claim_loop(lambda: conn.fetch(lease_sql, *args), finish)

        def wide_sql(conn: asyncpg.Connection, number: int) -> Awaitable[None]:
            queues, worker = [self.params["queue"]], f"bench-wide-{number}"

            async def finish(rows: list[asyncpg.Record]) -> None:
                ids, leases = [row["id"] for row in rows], [row["lease_id"] for row in rows]
                done = await conn.fetch(floor_whole.FINISH_MANY, ids, leases, [None] * len(rows))
                if len(done) != len(rows):
                    raise LoadError(f"wide finish matched {len(done)} of {len(rows)} leases")

            return claim_loop(lambda: conn.fetch(floor_whole.CLAIM, queues, batch, worker), finish)

        async def insert_claim_finish(conn: asyncpg.Connection, jobs: int) -> None:
            nonlocal last
            for i in range(jobs):
                await conn.fetchval(BARE_INSERT, json.dumps({"i": i}))
                while not (rows := await conn.fetch(BARE_CLAIM, 1)):
                    counts["statements"] += 1
                await conn.execute(BARE_FINISH_ONE, rows[0]["id"])
                counts["statements"] += 3
                counts["jobs"] += 1
                last = time.time()

        if mode == "insert":
            shares = split(int(self.params["jobs"]), len(self.connections))
            await asyncio.gather(
                *(insert_claim_finish(c, n) for c, n in zip(self.connections, shares, strict=True))
            )
        elif mode == "jobq_sql":
            await asyncio.gather(*(jobq_sql(c, n) for n, c in enumerate(self.connections)))
        elif mode == "wide_sql":
            await asyncio.gather(*(wide_sql(c, n) for n, c in enumerate(self.connections)))
        else:
            await asyncio.gather(*(bare(c) for c in self.connections))
        return {**counts, "last_done": last}


class BareWake(Load):
    """Enqueue-to-claim with a waiting claimer, straight on asyncpg: the reference for
    jobq's enqueue-to-lease latency (what PostgreSQL's commit, NOTIFY and LISTEN allow).

    A producer inserts one row and notifies in one autocommitted statement (a durable
    commit, as jobq's enqueue), every ~`interval_s`; a listening connection hears it and
    a claimer connection claims one row (SKIP LOCKED) and marks it done. Each sample is
    the time from before the insert to the claim's answer, and the insert's own time.
    """

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        dsn = self.params["dsn"]
        self.producer, self.listener, self.claimer = [await asyncpg.connect(dsn) for _ in range(3)]
        for conn in (self.producer, self.listener, self.claimer):
            stack.push_async_callback(conn.close)
        self.due = asyncio.Event()
        await self.listener.add_listener(BARE_DUE_CHANNEL, lambda *_: self.due.set())
        await self.claimer.execute("SELECT 1")

    async def run(self) -> dict[str, Any]:
        samples, interval = int(self.params["samples"]), float(self.params["interval_s"])
        latencies: list[float] = []
        insert_ms: list[float] = []
        for i in range(samples):
            self.due.clear()
            sent = time.perf_counter()
            await self.producer.execute(BARE_INSERT_NOTIFY, json.dumps({"i": i}))
            insert_ms.append((time.perf_counter() - sent) * 1000)
            await asyncio.wait_for(self.due.wait(), 10)
            rows = await self.claimer.fetch(BARE_CLAIM, 1)
            latencies.append((time.perf_counter() - sent) * 1000)
            if len(rows) != 1:
                raise LoadError("a notified claim found no row")
            await self.claimer.execute(BARE_FINISH_ONE, rows[0]["id"])
            await asyncio.sleep(interval * random.uniform(0.5, 1.5))
        return {"jobs": len(latencies), "latency_ms": latencies, "insert_ms": insert_ms}
