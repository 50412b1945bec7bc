"""An update's statistics (migration 0040's `jobq.count_job_changes`, which groups the
rows before spreading them) are what `jobq.job_stats_of` gives for the rows after
less the rows before, for every kind of update; and deltas written by 0025's function
and by 0040's add up to the table's counts (jobs in flight at the upgrade)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from app.db.sqlscript import statements

VERSIONS = Path(__file__).parents[2] / "alembic" / "versions"

# Jobs of every state over two queues, some finished without an attempt's time.
FILL = """
INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds, attempt,
                       created_at, started_at, attempted_at, finished_at,
                       lease_id, lease_expires_at)
SELECT 'u' || (i % 2), 't', '{}', state, 3, 60, CASE WHEN started THEN 1 ELSE 0 END,
       created, CASE WHEN started THEN created + i * interval '13 ms' END,
       CASE WHEN started AND i % 7 <> 0 THEN created + i * interval '13 ms' END,
       CASE WHEN state IN ('succeeded', 'failed', 'cancelled')
            THEN created + i * interval '13 ms' + i * interval '29 ms' END,
       CASE WHEN state = 'running' THEN gen_random_uuid() END,
       CASE WHEN state = 'running' THEN now() + interval '1 hour' END
  FROM (SELECT i, now() - i * interval '17 s' AS created, i % 6 NOT IN (0, 1) AS started,
               CAST(CASE i % 6 WHEN 0 THEN 'queued' WHEN 1 THEN 'waiting'
                               WHEN 2 THEN 'running' WHEN 3 THEN 'succeeded'
                               WHEN 4 THEN 'failed' ELSE 'cancelled' END
                    AS jobq.job_state) AS state
          FROM generate_series(1, 600) AS i) AS g
"""

# Each a kind of update the service, the reaper or an operator makes.
UPDATES = [
    # a lease: queued to running, first or later attempt
    """UPDATE jobq.jobs SET state = 'running', attempt = attempt + 1,
              lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute',
              attempted_at = now(), started_at = coalesce(started_at, now())
        WHERE state = 'queued'""",
    # a heartbeat: nothing counted changes
    "UPDATE jobq.jobs SET lease_expires_at = now() + interval '2 minutes' WHERE state = 'running'",
    # completes and fails
    """UPDATE jobq.jobs SET state = CASE WHEN id % 2 = 0 THEN 'succeeded' ELSE 'failed' END
                                    ::jobq.job_state,
              finished_at = now(), lease_id = NULL, lease_expires_at = NULL
        WHERE state = 'running' AND id % 3 = 0""",
    # retries: running to queued
    """UPDATE jobq.jobs SET state = 'queued', lease_id = NULL, lease_expires_at = NULL
        WHERE state = 'running'""",
    # retried by an operator: failed and cancelled to queued, their end forgotten
    """UPDATE jobq.jobs SET state = 'queued', finished_at = NULL
        WHERE state IN ('failed', 'cancelled') AND id % 2 = 0""",
    # times moved (as a test or a repair might) and jobs moved between queues
    "UPDATE jobq.jobs SET finished_at = finished_at - interval '2 days' WHERE id % 5 = 0",
    "UPDATE jobq.jobs SET queue = 'u9' WHERE id % 4 = 0",
    "UPDATE jobq.jobs SET attempted_at = NULL WHERE state = 'succeeded' AND id % 3 = 0",
]

DELTAS = """
SELECT queue, kind, state::text, minute, bucket, sum(n) FROM jobq.job_stat_deltas
 GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0
"""

EXPECTED = """
SELECT s.queue, s.kind, s.state::text, s.minute, s.bucket, sum(s.n)
  FROM (SELECT *, 1 AS sign FROM jobq.jobs
        UNION ALL
        SELECT *, -1 FROM counted_before) AS j
 CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                      j.attempted_at, j.finished_at, j.sign, true) s
 GROUP BY 1, 2, 3, 4, 5 HAVING sum(s.n) <> 0
"""

COUNTS_OFF = """
SELECT queue, state::text, coalesce(c.n, 0) - coalesce(t.n, 0) AS off
  FROM (SELECT queue, state, sum(n) AS n FROM jobq.job_stat_deltas
         WHERE kind = 'jobs' GROUP BY 1, 2) AS c
  FULL JOIN (SELECT queue, state, count(*) AS n FROM jobq.jobs GROUP BY 1, 2) AS t
    USING (queue, state)
 WHERE coalesce(c.n, 0) <> coalesce(t.n, 0)
"""


def _function(path: Path) -> str:
    """The migration's `CREATE … jobq.count_job_changes()`, as a replacement."""
    (found,) = (
        s
        for s in statements(path.read_text(encoding="utf-8"))
        if s.startswith("CREATE") and "FUNCTION jobq.count_job_changes()" in s.split("\n", 1)[0]
    )
    return found.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def _newest() -> Path:
    """The last migration script that makes `jobq.count_job_changes()` again."""
    return max(
        path
        for path in VERSIONS.glob("*.sql")
        if "FUNCTION jobq.count_job_changes()" in path.read_text(encoding="utf-8")
    )


async def test_each_update_adds_what_its_rows_change(db: asyncpg.Connection) -> None:
    await db.execute(FILL)
    for update in UPDATES:
        await db.execute("DELETE FROM jobq.job_stat_deltas")
        await db.execute("DROP TABLE IF EXISTS counted_before")
        await db.execute("CREATE TEMP TABLE counted_before AS SELECT * FROM jobq.jobs")
        await db.execute(update)
        want = set(map(tuple, await db.fetch(EXPECTED)))
        assert set(map(tuple, await db.fetch(DELTAS))) == want, update
        assert update.startswith("UPDATE jobq.jobs SET lease_expires_at") or want


async def test_deltas_before_and_after_the_upgrade_add_up(db: asyncpg.Connection) -> None:
    await db.execute(FILL)
    try:
        await db.execute(_function(VERSIONS / "0025_queue_statistics.sql"))
        await db.execute(UPDATES[0])  # leased under 0025's function
    finally:
        await db.execute(_function(_newest()))  # the migrations' own, for later tests too
    await db.execute(UPDATES[2])  # finished and retried under today's (0040's rules)
    await db.execute(UPDATES[3])
    assert await db.fetch(COUNTS_OFF) == []
