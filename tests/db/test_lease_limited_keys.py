"""The keyed lease of a limited queue walks only the keys that have due jobs: delayed
jobs with keys of their own (thousands of customers' reminders, say) cost it nothing per
key."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from app.jobs import repository as jobs_sql
from tests.statements import args_of

DELAYED_KEYS = 300
PARAMS: dict[str, Any] = {
    "queue": "lim",
    "types": [],
    "max_jobs": 5,
    "lease_seconds": None,
    "worker_id": "w",
    "key_id": None,
}


def _loops(plan: Any, found: list[int]) -> list[int]:
    """The loops of every node that reads the recursive key walk's work table."""
    if isinstance(plan, dict):
        if plan.get("Node Type") == "WorkTable Scan":
            found.append(plan["Actual Loops"])
        for value in plan.values():
            _loops(value, found)
    elif isinstance(plan, list):
        for value in plan:
            _loops(value, found)
    return found


async def test_delayed_keys_are_not_walked(db: asyncpg.Connection) -> None:
    await db.execute("INSERT INTO jobq.queues (name, max_running_per_key) VALUES ('lim', 1)")
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               run_at, concurrency_key)
        SELECT 'lim', 't', '{}', 'queued', 5, 60,
               CASE WHEN i <= 3 THEN now() - interval '1 minute'
                    ELSE now() + interval '1 day' END,
               'k' || lpad(i::text, 5, '0')
          FROM generate_series(1, $1 + 3) AS i
        """,
        DELAYED_KEYS,
    )
    statement = jobs_sql.LEASE_LIMITED
    transaction = db.transaction()
    await transaction.start()
    try:
        (row,) = await db.fetch(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, *args_of(statement, PARAMS)
        )
        leased = await db.fetch(
            "SELECT concurrency_key FROM jobq.jobs WHERE queue = 'lim' AND state = 'running'"
        )
    finally:
        await transaction.rollback()
    assert sorted(r["concurrency_key"] for r in leased) == ["k00001", "k00002", "k00003"]
    walked = sum(_loops(json.loads(row[0]), []))
    assert walked <= 3 + 1, walked  # the due keys and the step that finds none after them
