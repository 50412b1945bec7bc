"""A page of a queue's failed jobs reads the page, not the queue's whole failed history
(migration 0036): the list is in id order, and so is the index of dead jobs it walks."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from app.jobs import repository as jobs_sql
from tests.statements import args_of

PAGE = 50


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def test_a_page_of_failed_jobs_reads_the_page(db: asyncpg.Connection) -> None:
    # 3 queues, 60,000 finished jobs, 3 in 50 failed: 1,200 failed a queue
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               created_at, finished_at)
        SELECT 'q' || (g % 3), 't', '{}',
               CASE WHEN g % 50 < 3 THEN 'failed' ELSE 'succeeded' END::jobq.job_state,
               5, 60, now() - interval '1 day', now() - g * interval '1 second'
          FROM generate_series(1, 60000) g
        """
    )
    await db.execute("ANALYZE jobq.jobs")
    values = {
        "queue": "q1", "state": "failed", "type": None, "error_type": None,
        "created_after": None, "created_before": None, "key_contains": None,
        "after": 0, "limit": PAGE, "allowed_names": None, "allowed_patterns": None,
    }  # fmt: skip
    statement = jobs_sql.LIST_JOBS
    explained = await db.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, *args_of(statement, values)
    )
    nodes = _nodes(json.loads(explained)[0]["Plan"])
    scans = [n for n in nodes if n.get("Relation Name") == "jobs"]
    assert [n.get("Index Name") for n in scans] == ["jobs_dead_by_id_idx"], scans
    assert scans[0]["Actual Rows"] == PAGE  # the page, not the queue's 1,200 failed jobs
