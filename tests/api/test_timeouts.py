"""Execution timeouts: no attempt runs past its job's `timeout_seconds`; the reaper fails it
then as `timeout` (retried as any failure), and the worker's later calls are refused with
409 `execution_timeout`."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta

import asyncpg
import httpx
import pytest

from app.maintenance import Reaper
from tests.helpers import assert_problem, enqueue, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

PASS_EVERY_SECONDS = 0.2  # the reaper's interval in these tests


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def _reap_until_done(reaper: Reaper, job_id: int, within: float) -> float:
    """Run the reaper every PASS_EVERY_SECONDS, as its loop would, until it takes `job_id`;
    the monotonic time it did."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if job_id in (await reaper.run_once()).job_ids:
            return time.monotonic()
        await asyncio.sleep(PASS_EVERY_SECONDS)
    raise AssertionError(f"job {job_id} was not reaped within {within}s")


async def test_a_lease_ends_at_the_timeout_whatever_the_heartbeats_ask(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, timeout_seconds=30, lease_seconds=60)
    assert job["timeout_seconds"] == 30
    leased = await lease_one(client)
    started = _at(leased["job"]["started_at"])
    assert _at(leased["timeout_at"]) == started + timedelta(seconds=30)
    assert _at(leased["expires_at"]) == _at(leased["timeout_at"])  # 30 s, not the 60 asked
    beat = await client.post(
        f"/v1/leases/{leased['lease_id']}/heartbeat", json={"extend_seconds": 600}
    )
    assert beat.status_code == 200, beat.text
    assert _at(beat.json()["expires_at"]) == _at(leased["timeout_at"])

    short = await enqueue(client, "short", timeout_seconds=300, lease_seconds=10)
    leased = await lease_one(client, "short")
    assert leased["job"]["id"] == short["id"]
    ends = _at(leased["expires_at"]) - _at(leased["job"]["started_at"])
    assert ends == timedelta(seconds=10)  # a lease shorter than the timeout is as asked


async def test_a_job_without_a_timeout_has_none(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    assert job["timeout_seconds"] is None
    assert (await lease_one(client))["timeout_at"] is None


async def test_the_queues_setting_is_the_default_and_a_jobs_own_wins(
    client: httpx.AsyncClient,
) -> None:
    settings = await client.put("/v1/queues/slow/settings", json={"timeout_seconds": 120})
    assert settings.status_code == 200, settings.text
    assert settings.json()["timeout_seconds"] == 120
    assert (await enqueue(client, "slow"))["timeout_seconds"] == 120
    assert (await enqueue(client, "slow", timeout_seconds=5))["timeout_seconds"] == 5
    await client.put("/v1/queues/slow/settings", json={"timeout_seconds": None})
    assert (await enqueue(client, "slow"))["timeout_seconds"] is None


async def test_a_handler_past_its_timeout_fails_as_timeout_then_runs_again(
    client: httpx.AsyncClient, reaper: Reaper
) -> None:
    timeout = 2
    job = await enqueue(client, timeout_seconds=timeout, max_attempts=3)
    leased = await lease_one(client, worker="sleepy")
    leased_at = time.monotonic()
    token = leased["lease_id"]
    # The handler "sleeps" past its timeout, heartbeating as workers do.
    while time.monotonic() < leased_at + timeout - 0.5:
        assert (await client.post(f"/v1/leases/{token}/heartbeat", json={})).status_code == 200
        await asyncio.sleep(0.3)
    reaped_at = await _reap_until_done(reaper, job["id"], within=timeout + 5)
    # At the timeout, give or take one interval of the reaper (and this test's requests).
    assert timeout - 0.3 <= reaped_at - leased_at <= timeout + PASS_EVERY_SECONDS + 1.0

    failed = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert failed["state"] == "queued" and failed["attempt"] == 1  # retried as usual
    assert failed["last_error"]["type"] == "timeout"
    assert failed["last_error"]["details"] == {"worker_id": "sleepy", "timeout_seconds": timeout}
    (attempt,) = failed["attempts"]
    assert attempt["outcome"] == "timeout" and attempt["worker_id"] == "sleepy"
    ran = _at(attempt["finished_at"]) - _at(attempt["started_at"])
    assert timedelta(seconds=timeout) <= ran <= timedelta(seconds=timeout + 1.5)

    # The stale worker is refused, whatever it sends.
    for action, body in (
        ("heartbeat", {}),
        ("complete", {"result": "late"}),
        ("fail", {"error": {"type": "E"}}),
    ):
        problem = assert_problem(
            await client.post(f"/v1/leases/{token}/{action}", json=body), 409, "execution_timeout"
        )
        assert problem["job_id"] == job["id"] and problem["timeout_seconds"] == timeout
    acks = await client.post(
        "/v1/acks", json={"acks": [{"lease_id": token, "outcome": "complete"}]}
    )
    (result,) = acks.json()["results"]
    assert (result["status"], result["code"]) == (409, "execution_timeout")


async def test_a_call_past_the_timeout_is_refused_before_the_reaper_comes(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, timeout_seconds=60)
    token = (await lease_one(client))["lease_id"]
    # The attempt began 61 s ago (its lease, capped at the timeout, ended a second ago).
    await db.execute(
        "UPDATE jobq.jobs SET attempted_at = now() - interval '61 seconds',"
        " lease_expires_at = now() - interval '1 second' WHERE id = $1",
        job["id"],
    )
    for action, body in (("heartbeat", {}), ("complete", {}), ("fail", {"error": {"type": "E"}})):
        problem = assert_problem(
            await client.post(f"/v1/leases/{token}/{action}", json=body), 409, "execution_timeout"
        )
        assert problem["state"] == "running"
    assert (await reaper.run_once()).job_ids == [job["id"]]
    reaped = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert reaped["last_error"]["type"] == "timeout"


async def test_a_lease_that_lapses_before_the_timeout_is_a_lease_expired(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, timeout_seconds=600, lease_seconds=30)
    await lease_one(client)
    await db.execute(
        "UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        job["id"],
    )
    await reaper.run_once()
    reaped = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert reaped["last_error"]["type"] == "lease_expired"
    assert reaped["attempts"][0]["outcome"] == "lease_expired"


async def test_the_last_attempt_timing_out_fails_the_job(
    client: httpx.AsyncClient, reaper: Reaper
) -> None:
    job = await enqueue(client, timeout_seconds=1, max_attempts=1)
    await lease_one(client)
    await _reap_until_done(reaper, job["id"], within=5)
    failed = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert failed["state"] == "failed" and failed["last_error"]["type"] == "timeout"


async def test_a_timeout_out_of_range_is_refused(client: httpx.AsyncClient) -> None:
    for value in (0, 7 * 24 * 3600 + 1):
        response = await client.post(
            "/v1/queues/default/jobs", json={"type": "t", "timeout_seconds": value}
        )
        assert_problem(response, 422, "validation_error")
