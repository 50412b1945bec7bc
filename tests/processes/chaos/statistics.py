"""The statistics kept as jobs move (migrations 0025, 0043) against the table, after the
run: the counts by state and the failed groups' counts never drift across crashes,
restarts and outages, and the
per-minute rollups hold at least every stored job's enqueue (deleted jobs keep theirs)."""

from __future__ import annotations

from typing import Any

from tests.processes.chaos.databases import Db
from tests.processes.chaos.verdict import Verdict

COUNTED = """
SELECT c.queue, s.state, s.jobs
  FROM jobq.queue_job_counts() c
 CROSS JOIN LATERAL (VALUES ('waiting', c.waiting), ('queued', c.queued),
                            ('running', c.running), ('succeeded', c.succeeded),
                            ('failed', c.failed), ('cancelled', c.cancelled)) AS s(state, jobs)
 WHERE s.jobs <> 0
"""
IN_THE_TABLE = "SELECT queue, state::text, count(*) AS jobs FROM jobq.jobs GROUP BY 1, 2"
GROUPED = """
SELECT queue, type, error_type, sum(jobs) AS jobs
  FROM (SELECT queue, type, error_type, jobs FROM jobq.failed_group_counts
        UNION ALL
        SELECT queue, type, error_type, n FROM jobq.failed_group_deltas) AS g
 GROUP BY 1, 2, 3
"""
FAILED_IN_THE_TABLE = """
SELECT queue, type, last_error->>'type' AS error_type, count(*) AS jobs
  FROM jobq.jobs WHERE state = 'failed' GROUP BY 1, 2, 3
"""
ENQUEUED = """
SELECT m.queue, m.minute, sum(m.enqueued) AS rolled,
       (SELECT count(*) FROM jobq.jobs j
         WHERE j.queue = m.queue AND date_trunc('minute', j.created_at) = m.minute) AS stored
  FROM jobq.queue_minute_stats() m
 GROUP BY m.queue, m.minute
"""


async def check_statistics(db: Db, v: Verdict) -> dict[str, Any]:
    """Counts (by state, and the failed groups') equal to a full count; no stored job
    missing from its minute."""
    counted = {(r["queue"], r["state"]): r["jobs"] for r in await db.fetch_when_up(COUNTED)}
    table = {(r["queue"], r["state"]): r["jobs"] for r in await db.fetch_when_up(IN_THE_TABLE)}
    for key in sorted(counted.keys() | table.keys()):
        if counted.get(key, 0) != table.get(key, 0):
            v.fail(
                "counters drifted from the table",
                f"{key}: counted {counted.get(key, 0)}, stored {table.get(key, 0)}",
            )
    grouped = {
        (r["queue"], r["type"], r["error_type"]): r["jobs"] for r in await db.fetch_when_up(GROUPED)
    }
    failed = {
        (r["queue"], r["type"], r["error_type"]): r["jobs"]
        for r in await db.fetch_when_up(FAILED_IN_THE_TABLE)
    }
    for group in sorted(grouped.keys() | failed.keys(), key=str):
        if grouped.get(group, 0) != failed.get(group, 0):
            v.fail(
                "failed groups' counts drifted from the table",
                f"{group}: counted {grouped.get(group, 0)}, stored {failed.get(group, 0)}",
            )
    short = [r for r in await db.fetch_when_up(ENQUEUED) if r["rolled"] < r["stored"]]
    for row in short[:5]:
        v.fail(
            "a minute's rollup misses stored jobs",
            f"{row['queue']} {row['minute']}: {row['rolled']} < {row['stored']}",
        )
    return {"counted": sum(counted.values()), "stored": sum(table.values())}
