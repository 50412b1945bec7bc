"""Cron schedules over HTTP, and the scheduler's passes: each due tick becomes one job (its
idempotency key `schedule:<name>:<tick>`), however many replicas run a pass at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.schedules import Scheduler, SchedulerResult
from tests.helpers import assert_problem

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

NIGHTLY = {"queue": "reports", "type": "nightly", "payload": {"n": 1}, "cron": "0 3 * * *"}


async def _due(db: asyncpg.Connection, name: str, ago: timedelta) -> None:
    """Make `name` due, as if the service had been down since `ago`."""
    await db.execute(
        "UPDATE jobq.schedules SET next_tick = date_trunc('hour', now() - $2::interval)"
        " WHERE name = $1",
        name,
        ago,
    )


async def test_create_replace_read_pause_resume_delete(client: httpx.AsyncClient) -> None:
    created = await client.put(
        "/v1/schedules/nightly", json={**NIGHTLY, "timezone": "Europe/Paris"}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["name"], body["cron"], body["timezone"], body["catch_up"]) == (
        "nightly", "0 3 * * *", "Europe/Paris", "latest"
    )  # fmt: skip
    runs = [datetime.fromisoformat(t) for t in body["next_runs"]]
    assert len(runs) == 5 and runs == sorted(runs) and runs[0] > datetime.now(UTC)
    assert all(
        r.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris")).hour == 3 for r in runs
    )

    replaced = await client.put("/v1/schedules/nightly", json={**NIGHTLY, "cron": "@hourly"})
    assert replaced.status_code == 200 and replaced.json()["cron"] == "@hourly"
    listed = (await client.get("/v1/schedules")).json()["schedules"]
    assert [s["name"] for s in listed] == ["nightly"]

    paused = (await client.post("/v1/schedules/nightly/pause")).json()
    assert paused["paused"] is True and paused["next_runs"] == []
    resumed = (await client.post("/v1/schedules/nightly/resume")).json()
    assert resumed["paused"] is False and len(resumed["next_runs"]) == 5

    assert (await client.delete("/v1/schedules/nightly")).status_code == 204
    assert_problem(await client.get("/v1/schedules/nightly"), 404, "schedule_not_found")
    assert_problem(await client.delete("/v1/schedules/nightly"), 404, "schedule_not_found")


async def test_bad_schedules_are_refused_by_field(client: httpx.AsyncClient) -> None:
    for body, field in (
        ({**NIGHTLY, "cron": "every day"}, "cron"),
        ({**NIGHTLY, "cron": "0 3 * * * * *"}, "cron"),
        ({**NIGHTLY, "cron": "@every 500ms"}, "cron"),  # under the floor of 1 s
        ({**NIGHTLY, "timezone": "Moon/Base"}, "timezone"),
        ({**NIGHTLY, "catch_up": "sometimes"}, "catch_up"),
        ({**NIGHTLY, "queue": "bad name"}, "queue"),
    ):
        problem = assert_problem(
            await client.put("/v1/schedules/s", json=body), 422, "validation_error"
        )
        assert problem["errors"][0]["loc"] == ["body", field], problem
    assert (await client.get("/v1/schedules")).json()["schedules"] == []


async def test_a_due_tick_becomes_one_job(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await client.put("/v1/schedules/hourly", json={**NIGHTLY, "cron": "@hourly"})
    scheduler: Scheduler = app.state.services.scheduler
    assert (await scheduler.run_once()).enqueued == 0  # not due yet
    await _due(db, "hourly", timedelta(hours=3))
    result = await scheduler.run_once()
    assert (result.leader, result.enqueued) == (True, 1)  # catch_up latest: the last one
    (job,) = await db.fetch("SELECT * FROM jobq.jobs")
    tick = result.ticks[0][1]
    assert job["idempotency_key"] == f"schedule:hourly:{tick.isoformat()}"
    assert (job["queue"], job["type"], job["payload"]) == ("reports", "nightly", '{"n": 1}')
    assert '"schedule": "hourly"' in job["metadata"]
    assert (await scheduler.run_once()).enqueued == 0  # the next tick is in the future
    shown = (await client.get("/v1/schedules/hourly")).json()
    assert datetime.fromisoformat(shown["last_tick"]) == tick
    assert shown["recent_runs"] == [
        {"tick": shown["last_tick"], "job_id": job["id"], "job_state": "queued", "refused": None}
    ]


async def test_catch_up_all_and_none(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await client.put("/v1/schedules/all", json={**NIGHTLY, "cron": "@hourly", "catch_up": "all",
                                                 "catch_up_limit": 4})  # fmt: skip
    await client.put("/v1/schedules/none", json={**NIGHTLY, "cron": "@hourly", "catch_up": "none"})
    await _due(db, "all", timedelta(hours=10))
    await _due(db, "none", timedelta(hours=10))
    result = await app.state.services.scheduler.run_once()
    made = sorted(name for name, _ in result.ticks)
    # `all`: the 4 most recent missed ticks; `none`: the last one only if it came within
    # a minute (it did if this runs in the first minute of an hour).
    assert made.count("all") == 4
    assert made.count("none") in (0, 1)
    again = await app.state.services.scheduler.run_once()
    assert again.ticks == []


async def test_a_full_queue_refuses_a_tick_and_the_schedule_goes_on(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await client.put("/v1/queues/reports/settings", json={"max_backlog": 1})
    await client.post("/v1/queues/reports/jobs", json={"type": "filler"})
    await client.put("/v1/schedules/hourly", json={**NIGHTLY, "cron": "@hourly"})
    await _due(db, "hourly", timedelta(hours=1))
    result = await app.state.services.scheduler.run_once()
    assert (result.enqueued, result.refused) == (0, 1)
    run = (await client.get("/v1/schedules/hourly")).json()["recent_runs"][0]
    assert run["job_id"] is None and "max_backlog" in run["refused"]
    assert await db.fetchval("SELECT next_tick > now() FROM jobq.schedules") is True


async def test_replicas_passing_at_once_make_each_tick_once(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    apps = [app_factory() for _ in range(4)]
    clients = [await client_factory(a) for a in apps]
    for n in range(20):
        body = {**NIGHTLY, "cron": "*/5 * * * *", "catch_up": "all", "catch_up_limit": 50}
        await clients[0].put(f"/v1/schedules/s{n}", json=body)
        await _due(db, f"s{n}", timedelta(hours=2))
    results: list[SchedulerResult] = []
    for _ in range(3):  # passes racing each other, several times over
        results += await asyncio.gather(*(a.state.services.scheduler.run_once() for a in apps))
    made = [tick for r in results for tick in r.ticks]
    assert len(made) == len(set(made)), "a tick was made twice"
    jobs = await db.fetchval("SELECT count(*) FROM jobq.jobs")
    runs = await db.fetchval("SELECT count(*) FROM jobq.schedule_runs")
    assert jobs == runs == len(made) >= 20 * 24  # every 5 minutes for two hours
    assert await db.fetchval("SELECT count(*) FROM jobq.schedules WHERE next_tick <= now()") == 0
