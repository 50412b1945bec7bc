"""What the jobs table checks itself (migration 0019): the running job's lease, the
defaults' ranges where they are set, and the dependency trigger's own tests."""

from __future__ import annotations

import asyncio
import os

import asyncpg
import pytest

from app.db.migrate import upgrade
from tests.conftest import _drop, _recreate, plain
from tests.db.test_migration_0016 import downgrade

NOTIFIED_WITHIN_SECONDS = 0.5


async def _job(db: asyncpg.Connection, state: str, **flags: bool) -> int:
    columns = ", ".join(flags)
    values = ", ".join("true" for _ in flags)
    job_id: int = await db.fetchval(
        f"""
        INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds, state,
                               lease_id, lease_expires_at{", " if flags else ""}{columns})
        VALUES ('q', 't', '{{}}', 5, 60, '{state}', gen_random_uuid(), now() + interval '1 min'
                {", " if flags else ""}{values})
        RETURNING id
        """
    )
    return job_id


async def _finished_notices(db: asyncpg.Connection, update: str, job_id: int) -> list[str]:
    """The jobq_finished notifications that `update` (of job $1) sent."""
    heard: list[str] = []

    def listener(*args: object) -> None:  # (connection, pid, channel, payload)
        heard.append(str(args[3]))

    await db.add_listener("jobq_finished", listener)
    try:
        await db.execute(update, job_id)
        await asyncio.sleep(NOTIFIED_WITHIN_SECONDS)
    finally:
        await db.remove_listener("jobq_finished", listener)
    return heard


async def test_a_running_job_without_a_lease_is_refused(db: asyncpg.Connection) -> None:
    job_id = await _job(db, "running")
    with pytest.raises(asyncpg.CheckViolationError, match="running_has_lease"):
        await db.execute("UPDATE jobq.jobs SET lease_expires_at = NULL WHERE id = $1", job_id)


@pytest.mark.parametrize(
    ("column", "value"),
    [("default_max_attempts", 0), ("default_lease_seconds", 0), ("max_lease_seconds", 59)],
)
async def test_the_enqueue_defaults_are_checked_where_they_are_set(
    db: asyncpg.Connection, column: str, value: int
) -> None:
    # (the service writes 5 attempts and a 60-second lease by default)
    await db.execute(
        "UPDATE jobq.enqueue_limits SET default_max_attempts = 5, default_lease_seconds = 60,"
        " max_lease_seconds = 43200"
    )
    with pytest.raises(asyncpg.CheckViolationError, match=column):
        await db.execute(f"UPDATE jobq.enqueue_limits SET {column} = $1", value)


async def test_a_finish_is_announced_to_those_waiting_for_it(db: asyncpg.Connection) -> None:
    job_id = await _job(db, "running", notify_finish=True)
    update = "UPDATE jobq.jobs SET state = 'succeeded', lease_expires_at = NULL WHERE id = $1"
    assert await _finished_notices(db, update, job_id) == [str(job_id)]


async def test_an_update_that_keeps_the_state_announces_nothing(db: asyncpg.Connection) -> None:
    # The trigger's WHEN tests only the flags; its function tests that the state changed.
    job_id = await _job(db, "running", notify_finish=True)
    await db.execute(
        "UPDATE jobq.jobs SET state = 'succeeded', lease_expires_at = NULL WHERE id = $1",
        job_id,
    )
    update = "UPDATE jobq.jobs SET state = state, updated_at = now() WHERE id = $1"
    assert await _finished_notices(db, update, job_id) == []


async def test_only_jobs_with_dependents_or_waiters_call_the_trigger(
    db: asyncpg.Connection,
) -> None:
    plain_job = await _job(db, "running")
    waited_for = await _job(db, "running", notify_finish=True)
    finish = "UPDATE jobq.jobs SET state = 'succeeded', lease_expires_at = NULL WHERE id = $1"
    calls = (
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions"
        " WHERE funcname = 'after_job_state_change'"
    )
    await db.execute("SET track_functions = 'pl'")
    async with db.transaction():  # this transaction's counts
        await db.execute(finish, plain_job)
        assert await db.fetchval(calls) == 0
        await db.execute(finish, waited_for)
        assert await db.fetchval(calls) == 1


_CHECKS = (
    "SELECT conname FROM pg_constraint WHERE conrelid = 'jobq.jobs'::regclass"
    " AND contype = 'c' ORDER BY conname"
)


async def _checks_of_jobs(url: str) -> list[str]:
    conn = await asyncpg.connect(plain(url))
    try:
        return [r[0] for r in await conn.fetch(_CHECKS)]
    finally:
        await conn.close()


async def test_migration_0019_goes_down_and_up_again(server_url: str) -> None:
    name = f"jobq_migration_0019_{os.getpid()}"
    url = await _recreate(server_url, name)  # at head
    try:
        await downgrade(url, "0018")
        assert await _checks_of_jobs(url) == [
            "jobs_attempt_check",
            "jobs_lease_seconds_check",
            "jobs_max_attempts_check",
            "running_has_lease",
        ]
        await upgrade(url)
        assert await _checks_of_jobs(url) == ["running_has_lease"]
    finally:
        await _drop(server_url, name)
