"""Retention: finished jobs are deleted after their state's age, by one replica at a time."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.maintenance import MAINTENANCE_LOCK_KEY, Pruner
from tests.helpers import enqueue, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

HOUR = 3600


async def _finish(client: httpx.AsyncClient, outcome: str) -> int:
    job = await enqueue(client, max_attempts=1)
    held = await lease_one(client)
    body = {} if outcome == "complete" else {"error": {"type": "E"}}
    response = await client.post(f"/v1/leases/{held['lease_id']}/{outcome}", json=body)
    assert response.status_code == 200
    job_id: int = job["id"]
    return job_id


async def _age(db: asyncpg.Connection, job_id: int, hours: float) -> None:
    await db.execute(
        "UPDATE jobq.jobs SET finished_at = now() - make_interval(secs => $2) WHERE id = $1",
        job_id,
        hours * HOUR,
    )


async def _ids(db: asyncpg.Connection) -> set[int]:
    return {row["id"] for row in await db.fetch("SELECT id FROM jobq.jobs")}


async def test_finished_jobs_go_after_their_retention(
    client: httpx.AsyncClient, pruner: Pruner, db: asyncpg.Connection
) -> None:
    old_success = await _finish(client, "complete")
    young_success = await _finish(client, "complete")
    old_failure = await _finish(client, "fail")
    young_failure = await _finish(client, "fail")  # older than a day, younger than a week
    queued = (await enqueue(client, "other"))["id"]
    await _age(db, old_success, 25)
    await _age(db, young_success, 23)
    await _age(db, old_failure, 24 * 7 + 1)
    await _age(db, young_failure, 24 * 6)
    result = await pruner.run_once()
    assert (result.leader, result.succeeded, result.failed) == (True, 1, 1)
    assert await _ids(db) == {young_success, young_failure, queued}


async def test_unfinished_jobs_are_never_pruned(
    client: httpx.AsyncClient, pruner: Pruner, db: asyncpg.Connection
) -> None:
    queued = (await enqueue(client, "q", delay_seconds=HOUR))["id"]
    await enqueue(client)
    running = (await lease_one(client))["job"]["id"]
    await db.execute("UPDATE jobq.jobs SET created_at = now() - interval '30 days'")
    assert (await pruner.run_once()).pruned == 0
    assert await _ids(db) == {queued, running}


async def test_zero_keeps_finished_jobs_forever(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(retain_succeeded_seconds=0, retain_failed_seconds=HOUR)
    client: httpx.AsyncClient = await client_factory(app)
    success = await _finish(client, "complete")
    failure = await _finish(client, "fail")
    await _age(db, success, 24 * 365)
    await _age(db, failure, 2)
    result = await app.state.services.pruner.run_once()
    assert (result.succeeded, result.failed) == (0, 1)
    assert await _ids(db) == {success}


async def test_pruning_works_in_batches(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(prune_batch_size=7)
    client: httpx.AsyncClient = await client_factory(app)
    await client.post("/v1/queues/default/jobs/batch", json={"jobs": [{"type": "t"}] * 30})
    await db.execute(
        "UPDATE jobq.jobs SET state = 'succeeded', finished_at = now() - interval '2 days'"
    )
    assert (await app.state.services.pruner.run_once()).succeeded == 30
    assert await _ids(db) == set()


async def test_a_job_the_pruner_cannot_delete_is_logged_and_the_rest_are_pruned(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_factory(prune_batch_size=4, prune_pause_seconds=0)
    client: httpx.AsyncClient = await client_factory(app)
    jobs = [await _finish(client, "complete") for _ in range(10)]
    await db.execute("UPDATE jobq.jobs SET finished_at = now() - interval '2 days'")
    await db.execute(
        f"""
        CREATE FUNCTION jobq.test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'this job cannot go'; END $$;
        CREATE TRIGGER test_refuse BEFORE DELETE ON jobq.jobs FOR EACH ROW
            WHEN (OLD.id = {jobs[1]}) EXECUTE FUNCTION jobq.test_refuse();
        """
    )
    pruner: Pruner = app.state.services.pruner
    try:
        with caplog.at_level(logging.ERROR, logger="jobq.pruner"):
            result = await pruner.run_once()
    finally:
        await db.execute("DROP TRIGGER test_refuse ON jobq.jobs; DROP FUNCTION jobq.test_refuse()")
    assert (result.succeeded, result.refused) == (9, 1)
    assert await _ids(db) == {jobs[1]}
    logged = [
        getattr(r, "fields", {}).get("job_id")
        for r in caplog.records
        if getattr(r, "event", None) == "pruner.job_failed"
    ]
    assert logged == [jobs[1]], caplog.text
    assert (await pruner.run_once()).succeeded == 1  # once it can go, it goes


async def test_the_pruner_rests_between_batches(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(prune_batch_size=10, prune_pause_seconds=0.2)
    client: httpx.AsyncClient = await client_factory(app)
    await client.post("/v1/queues/default/jobs/batch", json={"jobs": [{"type": "t"}] * 30})
    await db.execute(
        "UPDATE jobq.jobs SET state = 'succeeded', finished_at = now() - interval '2 days'"
    )
    started = time.monotonic()
    assert (await app.state.services.pruner.run_once()).succeeded == 30
    assert time.monotonic() - started >= 0.6  # three full batches, each followed by a rest


async def test_only_the_maintenance_leader_prunes(
    client: httpx.AsyncClient, pruner: Pruner, db: asyncpg.Connection
) -> None:
    await _age(db, await _finish(client, "complete"), 48)
    async with db.transaction():  # another replica is reaping or pruning
        assert await db.fetchval("SELECT pg_try_advisory_xact_lock($1)", MAINTENANCE_LOCK_KEY)
        blocked = await pruner.run_once()
        assert (blocked.leader, blocked.pruned) == (False, 0)
    assert (await pruner.run_once()).pruned == 1


async def test_migrations_tune_the_table_for_churn(db: asyncpg.Connection) -> None:
    options = await db.fetchval("SELECT reloptions FROM pg_class WHERE oid = 'jobq.jobs'::regclass")
    assert "fillfactor=90" in options
    assert "autovacuum_vacuum_scale_factor=0.02" in options
