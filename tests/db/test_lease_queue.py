"""The lease from one queue (lease_queue, its size written in) takes the
jobs the general lease would take, in the same order, and PostgreSQL keeps one plan for
it where it planned the general lease afresh on every call of a backlog."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from app.db.statement import Statement
from app.jobs import repository as jobs_sql
from tests.statements import args_of

PARAMS: dict[str, Any] = {"types": [], "lease_seconds": None, "worker_id": "w", "key_id": None}


async def _fill(db: asyncpg.Connection) -> None:
    """Jobs of `q` in every order the lease sorts by, some not due, two types; others
    in `other`."""
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               priority, run_at)
        SELECT CASE WHEN i % 9 = 0 THEN 'other' ELSE 'q' END,
               CASE WHEN i % 4 = 0 THEN 'b' ELSE 'a' END,
               '{}', 'queued', 5, 60, i % 3,
               now() - make_interval(secs => (i % 5) * 60)
                     + CASE WHEN i % 7 = 0 THEN interval '1 hour' ELSE interval '0' END
          FROM generate_series(1, 120) AS i
        """
    )


async def _taken(
    db: asyncpg.Connection, statement: Statement[Any], params: dict[str, Any]
) -> list[int]:
    """The ids `statement` leases, in its answer's order; nothing kept."""
    transaction = db.transaction()
    await transaction.start()
    try:
        return [row["id"] for row in await db.fetch(statement.sql, *args_of(statement, params))]
    finally:
        await transaction.rollback()


@pytest.mark.parametrize("max_jobs", [1, 7, 10, 100])
@pytest.mark.parametrize("types", [[], ["b"]])
async def test_the_lease_from_one_queue_takes_what_the_general_one_takes(
    db: asyncpg.Connection, max_jobs: int, types: list[str]
) -> None:
    await _fill(db)
    params = {**PARAMS, "queue": "q", "queues": ["q"], "max_jobs": max_jobs, "types": types}
    one = jobs_sql.lease_statement(max_jobs)
    assert one.name == "lease_queue"
    general = await _taken(db, jobs_sql.LEASE, params)
    assert len(general) == min(max_jobs, 23 if types else 91)  # due jobs of q (of type b)
    assert await _taken(db, one, params) == general

    # a paused queue gives nothing; nor does a limited one (lease_limited leases it)
    for setting, value, back in (("paused", "true", "false"), ("max_running", "5", "NULL")):
        await db.execute(
            f"INSERT INTO jobq.queues (name, {setting}) VALUES ('q', {value})"
            f" ON CONFLICT (name) DO UPDATE SET {setting} = {value}"
        )
        assert await _taken(db, jobs_sql.LEASE, params) == []
        assert await _taken(db, one, params) == []
        await db.execute(f"UPDATE jobq.queues SET {setting} = {back}")
        assert await _taken(db, one, params) == general


@pytest.mark.parametrize("max_jobs", [5, 100])
async def test_a_lease_keeps_one_plan_through_a_backlog(
    db: asyncpg.Connection, max_jobs: int
) -> None:
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 'queued', 5, 60 FROM generate_series(1, 5000)"
    )
    await db.execute("ANALYZE jobq.jobs")
    statement = jobs_sql.lease_statement(max_jobs)
    params = {**PARAMS, "queue": "q", "queues": ["q"], "max_jobs": max_jobs}
    for _ in range(10):
        assert len(await db.fetch(statement.sql, *args_of(statement, params))) == max_jobs
    plans = await db.fetchrow(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
        statement.sql,
    )
    # five custom plans to compare with, then the one cached (with `LIMIT $n`, all ten
    # were custom: a cached plan takes such a limit for a tenth of the 5,000 rows)
    assert plans is not None
    assert (plans["custom_plans"], plans["generic_plans"]) == (5, 5)


def test_a_lease_from_one_queue_has_its_size_written_in() -> None:
    for size in (1, 37, 100):
        numbered = jobs_sql.lease_statement(size)
        assert numbered.name == "lease_queue"
        assert f"LIMIT {size}\n" in numbered.sql
        assert "max_jobs" not in numbered.names
        assert jobs_sql.lease_statement(size) is numbered  # made once
    assert jobs_sql.lease_statement(101) is jobs_sql.LEASE_QUEUE  # none is asked


def test_the_lease_from_one_queue_updates_as_the_general_one() -> None:
    def update(statement: Statement[Any]) -> str:
        return statement.sql[statement.sql.index("UPDATE jobq.jobs j") :]

    # the same SET, fence and answer, its parameters numbered alike
    assert update(jobs_sql.LEASE_QUEUE) == update(jobs_sql.LEASE)
    assert jobs_sql.LEASE_QUEUE.names[1:] == jobs_sql.LEASE.names[1:]
