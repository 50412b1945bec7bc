"""Enqueue inside the producer's own transaction (`jobq.enqueue`, `jobq.enqueue_many`):
the job exists if and only if the producer commits, waiting workers are woken at commit,
and the functions apply the HTTP enqueue's defaults, limits and idempotency, to a role
that may execute them and nothing else, and lock no job the producer did not make."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.conftest import plain

ROLE = f"jobq_test_producer_{os.getpid()}"


@pytest.fixture
async def producer(database_url: str, db: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """A connection as a login role granted `jobq_producer`, and nothing else."""
    await db.execute(f"DROP ROLE IF EXISTS {ROLE}")
    await db.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE jobq_producer")
    dsn = plain(database_url)
    user = dsn.split("://", 1)[1].split("@", 1)[0].split(":", 1)[0]
    conn = await asyncpg.connect(dsn.replace(f"://{user}", f"://{ROLE}", 1))
    yield conn
    await conn.close()
    await db.execute(f"DROP ROLE IF EXISTS {ROLE}")


async def test_the_job_exists_if_and_only_if_the_producer_commits(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    async with producer.transaction():
        await producer.execute("SELECT jobq.enqueue('outbox', 'send')")
        assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 0  # not yet visible
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE queue = 'outbox'") == 1

    tx = producer.transaction()
    await tx.start()
    await producer.execute("SELECT jobq.enqueue('outbox', 'rolled-back')")
    await tx.rollback()
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE type = 'rolled-back'") == 0


async def test_waiting_workers_are_woken_at_commit(
    producer: asyncpg.Connection, database_url: str, db: asyncpg.Connection
) -> None:
    listener = await asyncpg.connect(plain(database_url))
    heard: list[str] = []
    await listener.add_listener("jobq_due", lambda *args: heard.append(str(args[3])))
    try:
        async with producer.transaction():
            await producer.execute("SELECT jobq.enqueue('wake', 't')")
            await asyncio.sleep(0.3)
            assert heard == []  # nothing before commit
        for _ in range(50):
            if heard:
                break
            await asyncio.sleep(0.02)
        assert len(heard) == 1 and heard[0].startswith("wake ")
    finally:
        await listener.close()


async def test_defaults_limits_and_idempotency_match_the_http_enqueue(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    row = await producer.fetchrow("SELECT * FROM jobq.enqueue('q', 't', idempotency_key => 'k')")
    again = await producer.fetchrow(
        "SELECT * FROM jobq.enqueue('q', 'other', idempotency_key => 'k')"
    )
    assert row is not None and again is not None
    assert (row["deduplicated"], again["deduplicated"], again["id"]) == (False, True, row["id"])
    job = await db.fetchrow("SELECT * FROM jobq.jobs WHERE id = $1", row["id"])
    limits = await db.fetchrow("SELECT * FROM jobq.enqueue_limits")
    assert job is not None and limits is not None
    assert job["max_attempts"] == limits["default_max_attempts"]
    assert job["lease_seconds"] == limits["default_lease_seconds"]
    assert (job["payload"], job["metadata"], job["priority"]) == ("null", "{}", 0)

    refusals = [
        ("SELECT jobq.enqueue('bad queue!', 't')", "JQ422", "queue"),
        ("SELECT jobq.enqueue('q', 't', priority => 40000)", "JQ422", "priority"),
        ("SELECT jobq.enqueue('q', 't', run_at => '9999-12-31T23:00:00Z')", "JQ422", "run_at"),
        ("SELECT jobq.enqueue('q', 't', run_at => now(), delay_seconds => 1)", "JQ422", "run_at"),
        ("SELECT jobq.enqueue('q', 't', max_attempts => 0)", "JQ422", "max_attempts"),
        ("SELECT jobq.enqueue('q', 't', lease_seconds => 999999)", "JQ422", "lease_seconds"),
        ("SELECT jobq.enqueue('q', 't', depends_on => ARRAY[424242]::bigint[])", "JQ422",
         "depends_on"),
        ("SELECT jobq.enqueue('q', 't', payload => to_jsonb(repeat('x', 300000)))", "JQ413",
         "payload"),
        ("SELECT jobq.enqueue('q', 't', metadata => '[1]')", "JQ422", "metadata"),
    ]  # fmt: skip
    for sql, code, field in refusals:
        with pytest.raises(asyncpg.PostgresError) as caught:
            await producer.execute(sql)
        assert (caught.value.sqlstate, caught.value.detail) == (code, field), sql
    deep = "[" * 40 + "]" * 40
    with pytest.raises(asyncpg.PostgresError) as caught:
        await producer.execute(f"SELECT jobq.enqueue('q', 't', payload => '{deep}')")
    assert caught.value.sqlstate == "JQ422"
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1


async def test_a_full_queue_refuses_and_a_batch_is_all_or_nothing(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    await db.execute("INSERT INTO jobq.queues (name, max_backlog) VALUES ('small', 2)")
    await producer.execute("SELECT jobq.enqueue('small', 't')")
    with pytest.raises(asyncpg.PostgresError) as caught:
        await producer.execute(
            "SELECT * FROM jobq.enqueue_many('small', $1::jsonb)",
            '[{"type": "a"}, {"type": "b"}]',
        )
    assert caught.value.sqlstate == "JQ429"
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1
    rows = await producer.fetch(
        "SELECT * FROM jobq.enqueue_many('wf', $1::jsonb)",
        '[{"type": "a"}, {"type": "b", "depends_on": [{"ref": 0}]}]',
    )
    assert [(r["ord"], r["state"]) for r in rows] == [(0, "queued"), (1, "waiting")]
    await producer.execute("SELECT jobq.enqueue('small', 't')")  # room for one more
    with pytest.raises(asyncpg.PostgresError) as caught:
        await producer.execute("SELECT jobq.enqueue('small', 't')")
    assert caught.value.sqlstate == "JQ429"


async def test_the_producer_role_may_only_enqueue(producer: asyncpg.Connection) -> None:
    for sql in (
        "SELECT count(*) FROM jobq.jobs",
        "DELETE FROM jobq.jobs",
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " VALUES ('q', 't', 'null', 1, 1)",
        "SELECT * FROM jobq.api_keys",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await producer.execute(sql)


async def test_the_producer_role_may_execute_the_two_functions_and_no_other(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    executable = await db.fetch(
        "SELECT p.oid::regprocedure::text AS name FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'jobq' AND has_function_privilege($1, p.oid, 'EXECUTE')",
        ROLE,
    )
    assert sorted(row["name"].split("(")[0] for row in executable) == [
        "jobq.enqueue",
        "jobq.enqueue_many",
    ]
    for sql in (
        "SELECT jobq.announce_due('q', now(), 1)",
        "SELECT jobq.queue_backlog('q', 10)",
        "SELECT jobq.blocking_parent(1)",
        "SELECT * FROM jobq.backlog_refusal('q', ARRAY[NULL::text])",
        "SELECT * FROM jobq.insert_jobs('q', ARRAY['t'], NULL, ARRAY[0], NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, 5, 60)",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await producer.execute(sql)


async def test_an_open_producer_transaction_locks_no_parent(
    producer: asyncpg.Connection, database_url: str, db: asyncpg.Connection
) -> None:
    """A worker finishing (or heartbeating) a parent never waits for a producer that
    named it; the children still end as their parents did once the producer commits."""
    fresh = await db.fetchval("SELECT id FROM jobq.enqueue('p', 't')")
    marked = await db.fetchval("SELECT id FROM jobq.enqueue('p', 't')")
    doomed = await db.fetchval("SELECT id FROM jobq.enqueue('p', 't')")
    await db.execute(
        "SELECT id FROM jobq.enqueue('c', 't', depends_on => ARRAY[$1::bigint])", marked
    )
    worker = await asyncpg.connect(plain(database_url))
    try:
        await worker.execute("SET lock_timeout = '2s'")
        async with producer.transaction():
            children = [
                await producer.fetchval(
                    "SELECT id FROM jobq.enqueue('c', 't', depends_on => ARRAY[$1::bigint])",
                    parent,
                )
                for parent in (fresh, marked, doomed)
            ]
            for parent in (fresh, marked):
                await worker.execute(
                    "UPDATE jobq.jobs SET updated_at = now() WHERE id = $1", parent
                )  # a heartbeat's write
                await worker.execute(
                    "UPDATE jobq.jobs SET state = 'succeeded', finished_at = now() WHERE id = $1",
                    parent,
                )
            await worker.execute(
                "UPDATE jobq.jobs SET state = 'failed', finished_at = now() WHERE id = $1", doomed
            )
    finally:
        await worker.close()
    states = await db.fetch(
        "SELECT state::text FROM jobq.jobs WHERE id = ANY($1) ORDER BY id", children
    )
    assert [row["state"] for row in states] == ["queued", "queued", "cancelled"]


async def test_the_limits_on_what_a_call_builds_hold_in_sql(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    await db.execute(
        "UPDATE jobq.enqueue_limits SET max_dependency_depth = 3, max_batch_jobs = 4,"
        " max_batch_dependencies = 5"
    )
    chain = [{"type": "t"}] + [{"type": "t", "depends_on": [{"ref": i}]} for i in range(3)]
    rows = await producer.fetch(
        "SELECT * FROM jobq.enqueue_many('q', $1::jsonb)", json.dumps(chain)
    )
    deepest = rows[-1]["id"]
    refusals = [
        (
            "SELECT id FROM jobq.enqueue('q', 't', depends_on => ARRAY[$1::bigint])",
            deepest,
            "depends_on",
        ),
        (
            "SELECT id FROM jobq.enqueue_many('q', $1::jsonb)",
            json.dumps([{"type": "t"}] * 5),
            "jobs",
        ),
        (
            "SELECT id FROM jobq.enqueue_many('q', $1::jsonb)",
            json.dumps([{"type": "t", "depends_on": [deepest - 1, deepest - 2]}] * 3),
            "jobs",
        ),
    ]
    for sql, arg, field in refusals:
        with pytest.raises(asyncpg.PostgresError) as caught:
            await producer.execute(sql, arg)
        assert (caught.value.sqlstate, caught.value.detail) == ("JQ422", field), sql
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 4


async def test_a_batch_is_made_alike_at_once_and_job_by_job(
    producer: asyncpg.Connection, db: asyncpg.Connection
) -> None:
    """jobq.enqueue_many makes a batch that names no parent in one statement, and any
    other job by job (through jobq.enqueue): the same items leave the same rows (but
    for their ids: a held key takes a number of the sequence in each statement)."""
    items: list[dict[str, Any]] = [  # four: an earlier test may leave max_batch_jobs at 4
        {"type": "a", "idempotency_key": "k", "priority": 2},
        {"type": "b", "idempotency_key": "k"},
        {"type": "c", "delay_seconds": 5, "metadata": {"m": 1}, "on_parent_failure": "run"},
        {
            "type": "d",
            "run_at": "2031-01-02T03:04:05Z",
            "payload": [1, {"x": None}],
            "max_attempts": 2,
            "lease_seconds": 7,
            "concurrency_key": "c",
        },
    ]
    made = {}
    for way, batch in (
        ("at once", items),
        ("job by job", [{**item, "depends_on": []} for item in items]),
    ):
        await db.execute("TRUNCATE jobq.jobs RESTART IDENTITY")
        answers = await producer.fetch(
            "SELECT ord, id = min(id) OVER () AS first, state::text, deduplicated"
            " FROM jobq.enqueue_many('q', $1::jsonb)",
            json.dumps(batch),
        )
        jobs = await db.fetch(
            "SELECT type, payload, priority, state::text, max_attempts, lease_seconds,"
            " idempotency_key, metadata, concurrency_key, run_on_parent_failure, has_parents,"
            " CASE WHEN run_at > now() + interval '1 year' THEN run_at::text"
            " ELSE (run_at - created_at)::text END AS run_at"
            " FROM jobq.jobs ORDER BY id"
        )
        made[way] = ([tuple(row) for row in answers], [tuple(row) for row in jobs])
    assert made["at once"] == made["job by job"]
    assert [answer[3] for answer in made["at once"][0]] == [False, True, False, False]
