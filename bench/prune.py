"""The pruner at scale: `--prune-rows` finished jobs (a day of history, all past the
default retention, written by SQL) deleted by the service's own `Pruner`, while workers
lease and complete jobs of another queue over HTTP.

From one fill, a window of pruning for each rest between batches in `RESTS` (none: how
the pruner ran before it had one): the rows it deleted and their rate (what bounds how
much history a day the pruner keeps up with), the WAL it wrote (`pg_current_wal_lsn`
before and after), the dead rows in `jobq.jobs`, and the lease latency while it ran
against the same load's just before it (the ratio is what to read: the two are
measured back to back).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx

from app.core.config import DEFAULT_PRUNE_BATCH_SIZE, DEFAULT_PRUNE_PAUSE_SECONDS
from app.db.database import Database
from app.db.engine import create_engine
from app.maintenance import MaintenanceRepository, Pruner
from bench import database
from bench.base import Bench
from bench.stats import latency_summary, ratio

HISTORY_QUEUE = "bench-history"
LEASE_QUEUE = "bench-prune-lease"
LEASE_JOBS = 200_000  # queued for the lease load: more than it takes in a run
LEASE_WORKERS = 4
BASELINE_SECONDS = 10.0
WINDOW_SECONDS = 30.0  # each rest's pruning is measured this long at most
RESTS = (0.0, 0.1, 0.5)  # seconds between two batches: none (as before), and two rests
DAY_SECONDS = 24 * 3600.0


async def fill(url: str, rows: int) -> None:
    """An emptied jobs table holding `rows` jobs that succeeded over a day, the newest
    an hour past a day's retention, and `LEASE_JOBS` queued ones for the lease load."""
    async with database.connect(url) as conn:
        await conn.execute("TRUNCATE jobq.jobs RESTART IDENTITY")
        await conn.execute(
            """
            INSERT INTO jobq.jobs (queue, type, payload, state, attempt, max_attempts,
                                   lease_seconds, created_at, run_at, attempted_at,
                                   started_at, finished_at, result)
            SELECT $1, 'bench', jsonb_build_object('i', g), 'succeeded', 1, 5, 60, f, f, f,
                   f, f, '{"ok": true}'
              FROM generate_series(1, $2) AS g,
                   LATERAL (SELECT now() - interval '25 hours'
                                   - make_interval(secs => 86400.0 * g / $2)) AS t(f)
            """,
            HISTORY_QUEUE,
            rows,
        )
        await conn.execute(
            """
            INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)
            SELECT $1, 'bench', jsonb_build_object('i', g), 5, 60
              FROM generate_series(1, $2) AS g
            """,
            LEASE_QUEUE,
            LEASE_JOBS,
        )
    await database.vacuum_analyze(url)


async def _lease_loop(client: httpx.AsyncClient, number: int, stop: asyncio.Event) -> list[float]:
    """Lease one job and complete it, again and again: each lease call's milliseconds."""
    body = {"queues": [LEASE_QUEUE], "max_jobs": 1, "worker_id": f"bench-prune-{number}"}
    latencies: list[float] = []
    while not stop.is_set():
        sent = time.perf_counter()
        answer = await client.post("/v1/leases", json=body)
        latencies.append((time.perf_counter() - sent) * 1000)
        answer.raise_for_status()
        for lease in answer.json()["leases"]:
            path = f"/v1/leases/{lease['lease_id']}/complete"
            (await client.post(path, json={})).raise_for_status()
    return latencies


async def _leasing(base_url: str, stop: asyncio.Event) -> list[float]:
    limits = httpx.Limits(max_connections=LEASE_WORKERS)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        runs = await asyncio.gather(*(_lease_loop(client, n, stop) for n in range(LEASE_WORKERS)))
    return [ms for run in runs for ms in run]


async def _wal_lsn(url: str) -> int:
    """Where the WAL is now (bytes from its origin: asyncpg reads a pg_lsn as a number)."""
    async with database.connect(url) as conn:
        return int(await conn.fetchval("SELECT pg_current_wal_lsn()"))


async def _measure(url: str, base_url: str, pause_seconds: float) -> dict[str, Any]:
    """The lease load alone for `BASELINE_SECONDS`, then beside a pruner pass for at most
    `WINDOW_SECONDS`."""
    stop = asyncio.Event()
    alone = asyncio.create_task(_leasing(base_url, stop))
    await asyncio.sleep(BASELINE_SECONDS)
    stop.set()
    baseline = await alone

    engine = create_engine(url, pool_size=2)
    pruner = Pruner(
        MaintenanceRepository(Database(engine)),
        retain_succeeded_seconds=DAY_SECONDS,
        retain_failed_seconds=7 * DAY_SECONDS,
        interval_seconds=60,
        batch_size=DEFAULT_PRUNE_BATCH_SIZE,
        pause_seconds=pause_seconds,
    )
    before = await _history(url)
    stop = asyncio.Event()
    beside = asyncio.create_task(_leasing(base_url, stop))
    lsn = await _wal_lsn(url)
    started = time.perf_counter()
    passing = asyncio.create_task(pruner.run_once())
    done, _ = await asyncio.wait({passing}, timeout=WINDOW_SECONDS)
    passing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await passing
    seconds = time.perf_counter() - started
    stop.set()
    pruning = await beside
    await engine.dispose()
    wal = await _wal_lsn(url) - lsn
    pruned = before - await _history(url)
    async with database.connect(url) as conn:
        await asyncio.sleep(1.0)  # the pruner's statistics reach pg_stat_user_tables
        dead = await conn.fetchval(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobq.jobs'::regclass"
        )
    alone_ms, pruning_ms = latency_summary(baseline), latency_summary(pruning)
    return {
        "pause_seconds": pause_seconds,
        "pruned": pruned,
        "whole_pass": bool(done),  # false: the window ended first
        "seconds": round(seconds, 2),
        "rows_per_s": round(pruned / seconds, 1) if seconds else None,
        "wal_bytes": int(wal),
        "wal_bytes_per_row": round(int(wal) / pruned, 1) if pruned else None,
        "dead_tuples": int(dead),
        "lease_alone": alone_ms,
        "lease_pruning": pruning_ms,
        "lease_p99_ratio": ratio(pruning_ms["p99_ms"], alone_ms["p99_ms"]),
        "lease_p50_ratio": ratio(pruning_ms["p50_ms"], alone_ms["p50_ms"]),
    }


async def _history(url: str) -> int:
    async with database.connect(url) as conn:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM jobq.jobs WHERE queue = $1", HISTORY_QUEUE
        )
        return count


def prune(bench: Bench) -> None:
    """Fill `--prune-rows` finished jobs, then run the service's pruner beside a lease
    load for a window of each rest between batches in `RESTS` (the default among them)."""
    rows = bench.config.prune_rows
    bench.say(f"prune: filling {rows:,} finished jobs and {LEASE_JOBS:,} queued ones")
    bench.db(fill(bench.url, rows))
    runs = []
    for pause in RESTS:
        bench.say(
            f"prune: {LEASE_WORKERS} leasers alone, then beside the pruner (rest {pause} s)"
            f" for at most {WINDOW_SECONDS:g} s"
        )
        s = bench.db(_measure(bench.url, bench.base_url, pause))
        bench.say(
            f"  {s['pruned']:,} rows in {s['seconds']} s ({s['rows_per_s']:,.0f}/s),"
            f" {s['wal_bytes_per_row']} WAL bytes a row, {s['dead_tuples']:,} dead tuples;"
            f" lease p99 {s['lease_pruning']['p99_ms']:.1f} ms against"
            f" {s['lease_alone']['p99_ms']:.1f} ms alone ({s['lease_p99_ratio']}x)"
        )
        runs.append(s)
    default = runs[RESTS.index(DEFAULT_PRUNE_PAUSE_SECONDS)]
    bench.scenarios["prune"] = {"rows": rows, "runs": runs, **default}
