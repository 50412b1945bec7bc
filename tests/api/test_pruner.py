"""Retention: finished jobs are deleted after their state's age, by one replica at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from app.maintenance import MAINTENANCE_LOCK_KEY, Pruner
from tests.helpers import enqueue, lease_one

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
