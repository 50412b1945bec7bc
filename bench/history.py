"""History written by SQL: a day of jobs over 50 queues, as a busy deployment keeps
them, for the scale scenario (`bench --scale ROWS`) and the pruner's measurements.

Of every 1,000 jobs, 889 succeeded, 22 failed for good (five error types) and 89 are
still queued and due: issue 47's 2.25 M rows (2 M succeeded, 50 k failed, 200 k
queued) at any size. Jobs are created evenly over the last day in id order; a finished
job waited 0-0.5 s for its lease and ran 0-2 s. The rows go in chunks, one transaction
each, with the table's statistics triggers off, then `jobq.recount_statistics()` counts
them once (the service's maintenance leader folds what it wrote): a fill of 20 M rows
writes no deltas row by row.
"""

from __future__ import annotations

import asyncio
import time

from bench.database import connect

HISTORY_QUEUES = 50
HISTORY_CHUNK_ROWS = 500_000
FOLD_POLL_SECONDS = 0.5

FILL_CHUNK = """
INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds, attempt,
                       run_at, created_at, started_at, attempted_at, finished_at,
                       last_error)
SELECT 'q' || (i % $4), 'report', jsonb_build_object('i', i), state, 3, 60,
       CASE WHEN state = 'queued' THEN 0 WHEN state = 'failed' THEN 3 ELSE 1 END,
       created, created,
       CASE WHEN state <> 'queued' THEN created + wait END,
       CASE WHEN state <> 'queued' THEN created + wait END,
       CASE WHEN state <> 'queued' THEN created + wait + ran END,
       CASE WHEN state = 'failed'
            THEN jsonb_build_object('type', 'Error' || (i % 5), 'message', 'boom ' || i) END
  FROM (SELECT i,
               CAST(CASE WHEN i % 1000 < 889 THEN 'succeeded'
                         WHEN i % 1000 < 911 THEN 'failed'
                         ELSE 'queued' END AS jobq.job_state) AS state,
               $5::timestamptz - interval '1 day' + interval '1 day' * (i::float8 / $3)
                   AS created,
               (i % 500) * interval '1 ms' AS wait,
               (i % 2000) * interval '1 ms' AS ran
          FROM generate_series($1::bigint, $2::bigint) AS i) AS g
"""


async def fill_history(url: str, rows: int, *, queues: int = HISTORY_QUEUES) -> float:
    """Add `rows` jobs of history to jobq's table; the seconds it took."""
    started = time.monotonic()
    async with connect(url) as conn:
        now = await conn.fetchval("SELECT now()")
        await conn.execute("ALTER TABLE jobq.jobs DISABLE TRIGGER USER")
        try:
            for first in range(1, rows + 1, HISTORY_CHUNK_ROWS):
                last = min(rows, first + HISTORY_CHUNK_ROWS - 1)
                await conn.execute(FILL_CHUNK, first, last, rows, queues, now)
        finally:
            await conn.execute("ALTER TABLE jobq.jobs ENABLE TRIGGER USER")
        await conn.execute("SELECT jobq.recount_statistics()")
        await conn.execute("VACUUM (ANALYZE) jobq.jobs")
    return time.monotonic() - started


async def wait_folded(url: str, within_seconds: float) -> bool:
    """Whether the maintenance leader folded every statistics delta in time."""
    deadline = time.monotonic() + within_seconds
    async with connect(url) as conn:
        while time.monotonic() < deadline:
            if not await conn.fetchval("SELECT EXISTS (SELECT FROM jobq.job_stat_deltas)"):
                return True
            await asyncio.sleep(FOLD_POLL_SECONDS)
    return False
