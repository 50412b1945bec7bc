"""The dashboard's queue reads cost what they show, not the history kept: a series reads
the minutes of its window, not every minute retained; the failed groups read their
counts (migration 0043) and one failed job a group, not every failed job."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from app.db.statement import P, Statement
from app.queues import repository as queues_sql
from app.queues.params import FailedGroupsParams, QueueSeriesParams


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def _scans(
    db: asyncpg.Connection, statement: Statement[P], params: P, table: str
) -> list[dict[str, Any]]:
    """The scans of `table` in the statement's plan, as it ran."""
    explained = await db.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, *statement.args(params)
    )
    return [n for n in _nodes(json.loads(explained)[0]["Plan"]) if n.get("Relation Name") == table]


async def test_a_series_reads_the_minutes_of_its_window(db: asyncpg.Connection) -> None:
    # three days of minutes for two queues: 8,640 rows
    await db.execute(
        """
        INSERT INTO jobq.queue_minutes (queue, minute, enqueued, succeeded)
        SELECT q, date_trunc('minute', now()) - m * interval '1 minute', 2, 1
          FROM generate_series(0, 3 * 1440 - 1) AS m, unnest(ARRAY['a', 'b']) AS q
        """
    )
    await db.execute("ANALYZE jobq.queue_minutes")
    scans = await _scans(
        db, queues_sql.QUEUE_SERIES, QueueSeriesParams("a", 60, 1), "queue_minutes"
    )
    assert scans and all(n["Actual Rows"] * n["Actual Loops"] <= 61 for n in scans), scans


async def test_failed_groups_read_one_failed_job_a_group(db: asyncpg.Connection) -> None:
    # 6,000 failed jobs in 3 types x (2 error types and none): 9 groups
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               created_at, finished_at, last_error)
        SELECT 'q', 't' || (g % 3), '{}', 'failed', 5, 60, now() - interval '1 day',
               now() - g * interval '1 second',
               CASE WHEN g % 9 >= 3 THEN jsonb_build_object('type', 'E' || (g % 9 / 6),
                                                            'message', 'm' || g) END
          FROM generate_series(1, 6000) g
        """
    )
    await db.execute("ANALYZE jobq.jobs")
    scans = await _scans(db, queues_sql.FAILED_GROUPS, FailedGroupsParams("q", 50), "jobs")
    assert {n.get("Index Name") for n in scans} == {"jobs_failed_latest_idx"}, scans
    # at most a row a probe, at most a probe a group (EXPLAIN gives rows per loop)
    assert all(n["Actual Rows"] <= 1 and n["Actual Loops"] <= 9 for n in scans), scans
    groups = await db.fetch(queues_sql.FAILED_GROUPS.sql, "q", 50)
    shown = {(g["type"], g["error_type"]): g["jobs"] for g in groups}
    table = await db.fetch(
        "SELECT type, last_error->>'type' AS error_type, count(*) AS jobs"
        " FROM jobq.jobs GROUP BY 1, 2"
    )
    assert len(shown) == 9
    assert shown == {(r["type"], r["error_type"]): r["jobs"] for r in table}
