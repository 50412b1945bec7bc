"""Start deadlines: a job not leased by its `start_by` never is; the reaper's pass cancels
it with a `last_error` of type `expired`, and its dependents follow their
`on_parent_failure`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.maintenance import Reaper
from tests.helpers import enqueue, lease, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


def _soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


async def _job(client: httpx.AsyncClient, job_id: int) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
    return body


async def test_a_deadline_passing_while_the_queue_is_paused_expires_the_job(
    client: httpx.AsyncClient, reaper: Reaper
) -> None:
    assert (await client.post("/v1/queues/quotes/pause")).status_code == 200
    deadline = _soon(1.0)
    quote = await enqueue(client, "quotes", start_by=deadline)
    assert datetime.fromisoformat(quote["start_by"]) == datetime.fromisoformat(deadline)
    cancelled_child = await enqueue(client, "quotes", depends_on=[quote["id"]])
    running_child = await enqueue(
        client, "quotes", depends_on=[quote["id"]], on_parent_failure="run"
    )
    other = await enqueue(client, "quotes")
    await asyncio.sleep(1.2)
    assert (await client.post("/v1/queues/quotes/resume")).status_code == 200
    # Before the reaper comes, the claim passes over it.
    assert [leased["job"]["id"] for leased in await lease(client, "quotes", max_jobs=10)] == [
        other["id"]
    ]
    result = await reaper.run_once()
    assert result.expired == [quote["id"]]
    expired = await _job(client, quote["id"])
    assert expired["state"] == "cancelled" and expired["attempt"] == 0
    error = expired["last_error"]
    assert error["type"] == "expired"
    assert error["message"] == "the job was not leased by its start_by deadline"
    assert error["details"]["start_by"] == expired["start_by"]  # in UTC, as the API says
    # its dependents: one cancelled with it, one runs anyway
    child = await _job(client, cancelled_child["id"])
    assert child["state"] == "cancelled"
    assert child["last_error"]["type"] == "parent_failed"
    assert (await _job(client, running_child["id"]))["state"] == "queued"
    assert (await lease_one(client, "quotes"))["job"]["id"] == running_child["id"]
    # operators find them by their error
    listed = await client.get(
        "/v1/jobs", params={"queue": "quotes", "state": "cancelled", "error_type": "expired"}
    )
    assert [job["id"] for job in listed.json()["jobs"]] == [quote["id"]]
    assert (await reaper.run_once()).expired == []


async def test_a_job_started_in_time_runs_and_a_retry_past_the_deadline_expires(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, start_by=_soon(60), max_attempts=3)
    token = (await lease_one(client))["lease_id"]
    await reaper.run_once()  # a running job is not expired
    assert (await _job(client, job["id"]))["state"] == "running"
    failed = await client.post(
        f"/v1/leases/{token}/fail", json={"error": {"type": "E"}, "retry_after_seconds": 0}
    )
    assert failed.json()["state"] == "queued"
    await db.execute(
        "UPDATE jobq.jobs SET start_by = now() - interval '1 second' WHERE id = $1", job["id"]
    )
    assert await lease(client) == []  # no attempt starts after the deadline
    assert (await reaper.run_once()).expired == [job["id"]]
    expired = await _job(client, job["id"])
    assert expired["state"] == "cancelled" and expired["attempt"] == 1
    assert [a["outcome"] for a in expired["attempts"]] == ["failed"]


async def test_a_waiting_job_expires_too(client: httpx.AsyncClient, reaper: Reaper) -> None:
    parent = await enqueue(client, "slow")
    child = await enqueue(client, "slow", depends_on=[parent["id"]], start_by=_soon(0.3))
    assert child["state"] == "waiting"
    await asyncio.sleep(0.5)
    assert (await reaper.run_once()).expired == [child["id"]]
    assert (await _job(client, child["id"]))["state"] == "cancelled"


async def test_a_start_by_out_of_range_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/default/jobs", json={"type": "t", "start_by": "2026-01-01T00:00:00"}
    )
    assert response.status_code == 422  # no time zone
