"""The statistics kept as jobs move (migrations 0025, 0043) equal a full count over the
table: after bulk history and a mix of enqueues, leases, finishes, retries, cancels, deletes,
purges and pruning, with the deltas folded or not."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.maintenance import Pruner, StatisticsKeeper
from tests.helpers import enqueue, lease

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

ROWS = int(os.environ.get("JOBQ_TEST_STATISTICS_ROWS", "100000"))
QUEUES = 5
BUCKET_RATIO = 2**0.25  # a percentile's bound: docs/operations/monitoring.md

# History by SQL: finished jobs 2 to 50 minutes ago (inside the last hour's window,
# whatever minute it ends on) or a day ago (outside), failed, cancelled, queued (some not
# due yet), waiting and running ones, over QUEUES queues.
FILL = """
INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds, attempt,
                       run_at, created_at, started_at, attempted_at, finished_at,
                       lease_id, lease_expires_at, last_error)
SELECT 's' || (i / 10 % $2), 't' || (i % 3), '{}', state, 3, 60,
       CASE WHEN started THEN 1 ELSE 0 END,
       CASE WHEN i % 97 = 0 THEN now() + interval '1 hour' ELSE created END,
       created,
       CASE WHEN started THEN created + wait END,
       CASE WHEN started THEN created + wait END,
       CASE WHEN state IN ('succeeded', 'failed', 'cancelled')
            THEN created + wait + ran END,
       CASE WHEN state = 'running' THEN gen_random_uuid() END,
       CASE WHEN state = 'running' THEN now() + interval '1 hour' END,
       CASE WHEN i % 4 > 0 THEN jsonb_build_object('type', 'E' || (i % 4), 'message', 'm' || i)
       END
  FROM (SELECT i,
               CAST(CASE WHEN i % 10 < 6 THEN 'succeeded' WHEN i % 10 = 6 THEN 'failed'
                         WHEN i % 10 = 7 THEN 'cancelled' WHEN i % 20 = 8 THEN 'queued'
                         WHEN i % 20 = 18 THEN 'waiting' ELSE 'running' END
                    AS jobq.job_state) AS state,
               i % 10 NOT IN (8) AS started,
               CASE WHEN i % 3 = 0 THEN now() - interval '1 day' - (i % 600) * interval '1 s'
                    ELSE now() - interval '50 minutes' + (i % 2400) * interval '1 s' END
                   AS created,
               (i % 977) * interval '7 ms' AS wait,
               (i % 331) * interval '31 ms' AS ran
          FROM generate_series(1, $1) AS i) AS g
"""

COUNTED = """
SELECT queue, state::text, jobs FROM (
    SELECT queue, 'waiting' AS state, waiting AS jobs FROM jobq.queue_job_counts()
    UNION ALL SELECT queue, 'queued', queued FROM jobq.queue_job_counts()
    UNION ALL SELECT queue, 'running', running FROM jobq.queue_job_counts()
    UNION ALL SELECT queue, 'succeeded', succeeded FROM jobq.queue_job_counts()
    UNION ALL SELECT queue, 'failed', failed FROM jobq.queue_job_counts()
    UNION ALL SELECT queue, 'cancelled', cancelled FROM jobq.queue_job_counts()) AS c
 WHERE jobs <> 0
"""

MINUTES = """
SELECT queue, minute, sum(enqueued) AS enqueued, sum(succeeded) AS succeeded,
       sum(failed) AS failed
  FROM jobq.queue_minute_stats()
 GROUP BY queue, minute
HAVING sum(enqueued) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0
"""

# What the minutes must hold: every stored job's enqueue, and its end if it succeeded
# or failed for good, in its minute.
MINUTES_OF_THE_TABLE = """
SELECT queue, minute, sum(enqueued) AS enqueued, sum(succeeded) AS succeeded,
       sum(failed) AS failed
  FROM (SELECT queue, date_trunc('minute', created_at) AS minute, 1 AS enqueued,
               0 AS succeeded, 0 AS failed
          FROM jobq.jobs
        UNION ALL
        SELECT queue, date_trunc('minute', finished_at), 0,
               CASE WHEN state = 'succeeded' THEN 1 ELSE 0 END,
               CASE WHEN state = 'failed' THEN 1 ELSE 0 END
          FROM jobq.jobs
         WHERE state IN ('succeeded', 'failed') AND finished_at IS NOT NULL) AS e
 GROUP BY queue, minute
"""

BUCKETS = """
SELECT queue, kind, CAST(key AS smallint) AS bucket, sum(CAST(value AS bigint)) AS jobs
  FROM jobq.queue_minute_stats() m
 CROSS JOIN LATERAL (SELECT 'wait' AS kind, key, value FROM jsonb_each_text(m.wait_buckets)
                     UNION ALL
                     SELECT 'run', key, value FROM jsonb_each_text(m.run_buckets)) AS b
 GROUP BY 1, 2, 3
HAVING sum(CAST(value AS bigint)) <> 0
"""

# The last hour's sums as the queue list reads them (kept by the fold, migration 0035,
# plus the deltas not folded) and as the minutes of that hour hold them.
RECENT = """
SELECT queue, kind, bucket, sum(jobs) AS jobs
  FROM (SELECT queue, kind, bucket, jobs FROM jobq.queue_recent
        UNION ALL
        SELECT queue, kind, coalesce(bucket, 0), n FROM jobq.job_stat_deltas
         WHERE kind <> 'jobs'
           AND minute >= (SELECT since FROM jobq.queue_recent_window)) AS r
 GROUP BY 1, 2, 3
HAVING sum(jobs) <> 0
"""

RECENT_OF_THE_MINUTES = """
SELECT m.queue, e.kind, e.bucket, sum(e.jobs) AS jobs
  FROM jobq.queue_minute_stats() m
 CROSS JOIN LATERAL jobq.minute_entries(m.enqueued, m.succeeded, m.failed,
                                        m.wait_buckets, m.run_buckets) AS e
 WHERE m.minute >= (SELECT since FROM jobq.queue_recent_window)
 GROUP BY 1, 2, 3
HAVING sum(e.jobs) <> 0
"""

BUCKETS_OF_THE_TABLE = """
SELECT queue, kind, bucket, count(*) AS jobs
  FROM (SELECT queue, 'wait' AS kind,
               jobq.duration_bucket(extract(epoch FROM started_at - created_at)::float8)
                   AS bucket
          FROM jobq.jobs WHERE started_at IS NOT NULL
        UNION ALL
        SELECT queue, 'run',
               jobq.duration_bucket(extract(epoch FROM finished_at - attempted_at)::float8)
          FROM jobq.jobs
         WHERE state IN ('succeeded', 'failed') AND finished_at IS NOT NULL
           AND attempted_at IS NOT NULL) AS d
 GROUP BY 1, 2, 3
"""

# The exact nearest-rank percentiles of the last hour, per queue.
PERCENTILES_OF_THE_TABLE = """
SELECT queue,
       percentile_disc(ARRAY[0.5, 0.95]) WITHIN GROUP (
           ORDER BY extract(epoch FROM started_at - created_at)) AS wait
  FROM jobq.jobs
 WHERE started_at > now() - interval '1 hour'
 GROUP BY queue
"""

DUE_OF_THE_TABLE = """
SELECT queue, count(*) FILTER (WHERE run_at <= now()) AS due,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now())) AS oldest
  FROM jobq.jobs WHERE state = 'queued' GROUP BY queue
"""


# Each queue's failed jobs by type and error type, as GET .../failed/groups reads them
# (folded plus not folded) and as the table holds them.
GROUPS = """
SELECT queue, type, error_type, sum(jobs) AS jobs
  FROM (SELECT queue, type, error_type, jobs FROM jobq.failed_group_counts
        UNION ALL
        SELECT queue, type, error_type, n FROM jobq.failed_group_deltas) AS g
 GROUP BY 1, 2, 3
HAVING sum(jobs) <> 0
"""

GROUPS_OF_THE_TABLE = """
SELECT queue, type, last_error->>'type', count(*) FROM jobq.jobs WHERE state = 'failed'
 GROUP BY 1, 2, 3
"""

# What the failed groups showed before they were counted (migration 0043): a full
# grouping of the queue's failed jobs.
GROUPED_IN_THE_TABLE = """
SELECT type, last_error->>'type' AS error_type, count(*) AS jobs,
       max(finished_at) AS latest_failed_at
  FROM jobq.jobs
 WHERE queue = $1 AND state = 'failed'
 GROUP BY 1, 2
"""


async def _rows(db: asyncpg.Connection, sql: str) -> set[tuple[Any, ...]]:
    return {tuple(r) for r in await db.fetch(sql)}


async def _counts_exact(db: asyncpg.Connection) -> None:
    table = "SELECT queue, state::text, count(*) FROM jobq.jobs GROUP BY 1, 2"
    assert await _rows(db, COUNTED) == await _rows(db, table)
    assert await _rows(db, GROUPS) == await _rows(db, GROUPS_OF_THE_TABLE)


async def _api_counts_exact(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    """GET /v1/queues shows each queue's counts as a full count over the table does."""
    response = await client.get("/v1/queues")
    assert response.status_code == 200, response.text
    shown = {q["queue"]: q for q in response.json()["queues"]}
    table = {
        (r["queue"], r["state"]): r["count"]
        for r in await db.fetch("SELECT queue, state::text, count(*) FROM jobq.jobs GROUP BY 1, 2")
    }
    due = {r["queue"]: r for r in await db.fetch(DUE_OF_THE_TABLE)}
    for queue, figures in shown.items():
        counts = figures["counts"]
        for state in ("queued", "running", "waiting", "failed", "cancelled"):
            assert counts[state] == table.get((queue, state), 0), (queue, state)
        assert counts["due"] == (due[queue]["due"] if queue in due else 0), queue
        oldest = due[queue]["oldest"] if queue in due else None
        if oldest is None:
            assert figures["oldest_due_age_seconds"] is None
        else:
            assert abs(figures["oldest_due_age_seconds"] - float(oldest)) < 5


async def _api_groups_exact(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    """GET .../failed/groups shows each queue's groups, and the latest failure of each,
    as a full grouping over the table does."""
    for n in range(QUEUES):
        response = await client.get(f"/v1/queues/s{n}/failed/groups")
        assert response.status_code == 200, response.text
        shown = response.json()["groups"]
        table = {
            (r["type"], r["error_type"]): r for r in await db.fetch(GROUPED_IN_THE_TABLE, f"s{n}")
        }
        assert len(shown) == min(len(table), 50)
        assert [g["jobs"] for g in shown] == sorted(
            (r["jobs"] for r in table.values()), reverse=True
        )[:50]
        for group in shown:
            row = table[(group["type"], group["error_type"])]
            assert group["jobs"] == row["jobs"]
            assert datetime.fromisoformat(group["latest_failed_at"]) == row["latest_failed_at"]
            latest = await db.fetchval(  # jobs may have failed at the same moment
                "SELECT array_agg(last_error->>'message') FROM jobq.jobs WHERE queue = $1"
                " AND state = 'failed' AND type = $2"
                " AND last_error->>'type' IS NOT DISTINCT FROM $3 AND finished_at = $4",
                f"s{n}",
                group["type"],
                group["error_type"],
                row["latest_failed_at"],
            )
            assert group["latest_message"] in latest


async def _mix(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    """Enqueues, leases, successes, retries, failures for good, cancels, redrives."""
    for n in range(30):
        await enqueue(client, f"s{n % QUEUES}", max_attempts=2)
    for queue in ("s0", "s1", "s2"):
        held = await lease(client, queue, max_jobs=6)
        for i, one in enumerate(held):
            path = f"/v1/leases/{one['lease_id']}"
            if i % 3 == 0:
                response = await client.post(f"{path}/complete", json={"result": i})
            elif i % 3 == 1:  # retried: queued again, then failed for good
                response = await client.post(f"{path}/fail", json={"error": {"type": "E"}})
            else:
                response = await client.post(
                    f"{path}/fail", json={"error": {"type": "F"}, "retryable": False}
                )
            assert response.status_code == 200, response.text
    queued = await db.fetch("SELECT id FROM jobq.jobs WHERE state = 'queued' LIMIT 5")
    for row in queued:
        response = await client.post(f"/v1/jobs/{row['id']}/cancel", json={})
        assert response.status_code == 200, response.text
    response = await client.post("/v1/queues/s2/failed/retry", json={"limit": 50})
    assert response.status_code == 200, response.text


async def _deletions(client: httpx.AsyncClient, db: asyncpg.Connection, pruner: Pruner) -> None:
    """A delete, a purge and the pruner's pass over history past retention."""
    finished = await db.fetchval("SELECT id FROM jobq.jobs WHERE state = 'failed' LIMIT 1")
    assert (await client.delete(f"/v1/jobs/{finished}")).status_code in (200, 204)
    response = await client.post("/v1/queues/s3/purge", json={"confirm": "s3"})
    assert response.status_code == 200, response.text
    assert response.json()["deleted"] > 0
    result = await pruner.run_once()
    assert result.succeeded > 0


@pytest.fixture
async def keeper(app: FastAPI, client: httpx.AsyncClient) -> StatisticsKeeper:
    del client  # started the app's lifespan, which built the keeper
    result: StatisticsKeeper = app.state.services.statistics
    return result


async def test_statistics_equal_a_full_count(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    keeper: StatisticsKeeper,
    pruner: Pruner,
) -> None:
    await db.execute(FILL, ROWS, QUEUES)
    await _counts_exact(db)
    assert await _rows(db, MINUTES) == await _rows(db, MINUTES_OF_THE_TABLE)
    await db.execute("SELECT jobq.recount_statistics()")  # what a fill without triggers runs
    await _counts_exact(db)
    assert await _rows(db, MINUTES) == await _rows(db, MINUTES_OF_THE_TABLE)
    half = await keeper.run_once()
    assert half.leader and half.folded > 0
    # as if the last fold was two days ago: the rollups of a day ago are in the window
    await db.execute("UPDATE jobq.queue_recent_window SET since = now() - interval '2 days'")
    await db.execute("DELETE FROM jobq.queue_recent")
    folded_minutes = RECENT_OF_THE_MINUTES.replace("queue_minute_stats()", "queue_minutes")
    await db.execute("INSERT INTO jobq.queue_recent " + folded_minutes)
    recent = await _rows(db, RECENT)
    assert recent == await _rows(db, RECENT_OF_THE_MINUTES)
    assert (await keeper.run_once()).leader  # moves the window on to the last hour
    assert await db.fetchval("SELECT since FROM jobq.queue_recent_window") > await db.fetchval(
        "SELECT now() - interval '61 minutes'"
    )
    assert await _rows(db, RECENT) == await _rows(db, RECENT_OF_THE_MINUTES) != recent
    await _counts_exact(db)

    await _mix(client, db)
    await _counts_exact(db)
    await _api_counts_exact(client, db)
    await _api_groups_exact(client, db)
    # nothing deleted yet: the rollups are those of the jobs stored
    minutes = await _rows(db, MINUTES)
    buckets = await _rows(db, BUCKETS)
    assert minutes == await _rows(db, MINUTES_OF_THE_TABLE)
    assert buckets == await _rows(db, BUCKETS_OF_THE_TABLE)
    exact = {r["queue"]: r["wait"] for r in await db.fetch(PERCENTILES_OF_THE_TABLE)}
    shown = {q["queue"]: q for q in (await client.get("/v1/queues")).json()["queues"]}
    for queue, (p50, p95) in exact.items():
        wait = shown[queue]["last_hour"]["wait_seconds"]
        for got, want in ((wait["p50"], p50), (wait["p95"], p95)):
            assert float(want) / BUCKET_RATIO <= got <= max(float(want) * BUCKET_RATIO, 0.0005)

    await db.execute(
        "UPDATE jobq.jobs SET finished_at = finished_at - interval '2 days'"
        " WHERE state = 'succeeded' AND created_at < now() - interval '12 hours'"
    )
    moved = await _rows(db, MINUTES)
    await _deletions(client, db, pruner)
    await _counts_exact(db)
    await _api_counts_exact(client, db)
    await _api_groups_exact(client, db)
    # deleted jobs keep the minutes they made
    assert await _rows(db, MINUTES) == moved

    folded = await keeper.run_once()
    assert folded.leader and folded.folded > 0
    assert await db.fetchval("SELECT count(*) FROM jobq.job_stat_deltas") == 0
    assert await _rows(db, RECENT) == await _rows(db, RECENT_OF_THE_MINUTES)
    await _counts_exact(db)
    await _api_counts_exact(client, db)
    await _api_groups_exact(client, db)
    assert await _rows(db, MINUTES) == moved
