"""The reaper: expired leases come back, stale workers are fenced out, one leader at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.maintenance import MAINTENANCE_LOCK_KEY, Reaper
from tests.helpers import assert_problem, enqueue, lease, lease_one


async def _expire(db: asyncpg.Connection, job_id: int | None = None) -> None:
    await db.execute(
        "UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second'"
        " WHERE state = 'running' AND ($1::bigint IS NULL OR id = $1)",
        job_id,
    )


async def test_expired_lease_is_requeued_with_backoff(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client)
    await lease_one(client, worker="doomed")
    await _expire(db)
    before = datetime.now(UTC)
    result = await reaper.run_once()
    assert (result.leader, result.requeued, result.failed) == (True, 1, 0)
    assert result.job_ids == [job["id"]]
    reaped = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert reaped["state"] == "queued" and reaped["attempt"] == 1
    assert reaped["last_error"]["type"] == "lease_expired"
    assert reaped["last_error"]["details"] == {"worker_id": "doomed"}
    (attempt,) = reaped["attempts"]
    assert attempt["outcome"] == "lease_expired" and attempt["worker_id"] == "doomed"
    assert attempt["error"] == reaped["last_error"]
    run_at = datetime.fromisoformat(reaped["run_at"])
    assert before + timedelta(seconds=8) < run_at < before + timedelta(seconds=12)


async def test_the_leaders_last_pass_is_shown_to_operators(
    client: httpx.AsyncClient, reaper: Reaper
) -> None:
    assert (await client.get("/v1/queues")).json()["database"]["reaper_last_pass"] is None
    before = datetime.now(UTC)
    assert (await reaper.run_once()).leader  # nothing to reap: the pass still counts
    shown = (await client.get("/v1/queues")).json()["database"]["reaper_last_pass"]
    assert before - timedelta(seconds=1) <= datetime.fromisoformat(shown) <= datetime.now(UTC)


async def test_live_leases_are_left_alone(client: httpx.AsyncClient, reaper: Reaper) -> None:
    await enqueue(client)
    await lease_one(client)
    assert (await reaper.run_once()).reaped == 0


async def test_stale_worker_cannot_finish_after_the_reaper(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client)
    stale = (await lease_one(client, worker="slow"))["lease_id"]
    await _expire(db)
    await reaper.run_once()
    for action, body in (
        ("complete", {"result": "late"}),
        ("fail", {"error": {"type": "E"}}),
        ("heartbeat", {}),
    ):
        problem = assert_problem(
            await client.post(f"/v1/leases/{stale}/{action}", json=body), 409, "lease_lost"
        )
        assert problem["state"] == "queued"
    await db.execute("UPDATE jobq.jobs SET run_at = now()")
    fresh = await lease_one(client, worker="fast")
    assert_problem(
        await client.post(f"/v1/leases/{stale}/complete", json={"result": "late"}),
        409,
        "lease_lost",
    )
    done = (
        await client.post(f"/v1/leases/{fresh['lease_id']}/complete", json={"result": "ok"})
    ).json()
    assert done["state"] == "succeeded" and done["result"] == "ok"
    row = await db.fetchrow("SELECT result, attempt FROM jobq.jobs WHERE id = $1", job["id"])
    assert row is not None and row["attempt"] == 2 and row["result"] == '"ok"'


async def test_expired_last_attempt_fails_the_job(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, max_attempts=1)
    await lease_one(client)
    await _expire(db)
    assert (await reaper.run_once()).failed == 1
    dead = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert dead["state"] == "failed" and dead["finished_at"] is not None
    assert await lease(client) == []


async def test_reaper_works_in_batches(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(reaper_batch_size=7)
    client: httpx.AsyncClient = await client_factory(app)
    await client.post("/v1/queues/default/jobs/batch", json={"jobs": [{"type": "t"}] * 30})
    await lease(client, max_jobs=30)
    await _expire(db)
    result = await app.state.services.reaper.run_once()
    assert result.requeued == 30 and len(set(result.job_ids)) == 30
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE state = 'running'") == 0


async def test_only_one_replica_reaps_at_a_time(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    await enqueue(client)
    await lease_one(client)
    await _expire(db)
    async with db.transaction():  # another replica is mid-pass
        assert await db.fetchval("SELECT pg_try_advisory_xact_lock($1)", MAINTENANCE_LOCK_KEY)
        blocked = await reaper.run_once()
        assert (blocked.leader, blocked.reaped) == (False, 0)
    assert (await reaper.run_once()).requeued == 1


async def test_reapers_racing_reap_each_job_once(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    apps = [app_factory(reaper_batch_size=5) for _ in range(4)]
    clients = [await client_factory(app) for app in apps]
    await clients[0].post("/v1/queues/default/jobs/batch", json={"jobs": [{"type": "t"}] * 200})
    await lease(clients[0], max_jobs=100)
    await lease(clients[0], max_jobs=100)
    await _expire(db)
    results = await asyncio.gather(*(app.state.services.reaper.run_once() for app in apps))
    reaped = [job_id for result in results for job_id in result.job_ids]
    assert len(reaped) == len(set(reaped))
    # a replica that found the lock taken leaves the rest to the next pass
    for app in apps:
        await app.state.services.reaper.run_once()
    assert (
        await db.fetchval(
            "SELECT count(*) FROM jobq.jobs WHERE attempt = 1 AND state = 'queued'"
            " AND jsonb_array_length(attempts) = 1"
        )
        == 200
    )


async def test_background_reaper_runs_on_its_interval(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    make_settings: Callable[..., Any],
    database_url: str,
    db: asyncpg.Connection,
) -> None:
    from app.main import create_app

    app = create_app(make_settings(reaper_interval_seconds=0.05), database_url=database_url)
    client: httpx.AsyncClient = await client_factory(app)
    job = await enqueue(client)
    await lease_one(client)
    await _expire(db)
    for _ in range(100):
        state = await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", job["id"])
        if state == "queued":
            break
        await asyncio.sleep(0.05)
    assert state == "queued"


async def test_each_reaped_batch_is_logged_with_its_replica(
    client: httpx.AsyncClient,
    reaper: Reaper,
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = await enqueue(client)
    await lease_one(client)
    await _expire(db)
    with caplog.at_level("INFO", logger="jobq.reaper"):
        await reaper.run_once()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "jobq.reaper"]
    fields = dict(part.split("=", 1) for part in line.split()[1:])
    assert fields["replica"] == reaper.replica
    assert float(fields["batch_started"]) <= float(fields["batch_ended"])
    assert (fields["requeued"], fields["failed"], fields["job_ids"]) == ("1", "0", str(job["id"]))
