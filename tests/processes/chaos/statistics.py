"""The statistics kept as jobs move (migration 0025) against the table, after the run:
the counts by state never drift across crashes, restarts and outages, and the
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
ENQUEUED = """
SELECT m.queue, m.minute, sum(m.enqueued) AS rolled,
       (SELECT count(*) FROM jobq.jobs j
         WHERE j.queue = m.queue AND date_trunc('minute', j.created_at) = m.minute) AS stored
  FROM jobq.queue_minute_stats() m
 GROUP BY m.queue, m.minute
"""


async def check_statistics(db: Db, v: Verdict) -> dict[str, Any]:
    """Counts equal to a full count; no stored job missing from its minute."""
    counted = {(r["queue"], r["state"]): r["jobs"] for r in await db.fetch_when_up(COUNTED)}
    table = {(r["queue"], r["state"]): r["jobs"] for r in await db.fetch_when_up(IN_THE_TABLE)}
    for key in sorted(counted.keys() | table.keys()):
        if counted.get(key, 0) != table.get(key, 0):
            v.fail(
                "counters drifted from the table",
                f"{key}: counted {counted.get(key, 0)}, stored {table.get(key, 0)}",
            )
    short = [r for r in await db.fetch_when_up(ENQUEUED) if r["rolled"] < r["stored"]]
    for row in short[:5]:
        v.fail(
            "a minute's rollup misses stored jobs",
            f"{row['queue']} {row['minute']}: {row['rolled']} < {row['stored']}",
        )
    return {"counted": sum(counted.values()), "stored": sum(table.values())}
