"""Snooze: a worker puts its leased job back for later without spending an attempt, at
most JOBQ_MAX_SNOOZES times a job; each snooze is in the job's history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import assert_problem, enqueue, lease, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


async def _snooze(client: httpx.AsyncClient, token: str, seconds: float) -> httpx.Response:
    return await client.post(f"/v1/leases/{token}/snooze", json={"seconds": seconds})


async def test_three_snoozes_then_success_spend_no_attempt_and_the_cap_refuses_more(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    client = await client_factory(app_factory(max_snoozes=3))
    job = await enqueue(client, max_attempts=2)
    for n in range(1, 4):
        leased = await lease_one(client, worker=f"w{n}")
        assert leased["job"]["attempt"] == 1  # every lease is still the first attempt
        snoozed = await _snooze(client, leased["lease_id"], 0)
        assert snoozed.status_code == 200, snoozed.text
        body = snoozed.json()
        assert body["state"] == "queued" and body["attempt"] == 0 and body["snoozes"] == n
    leased = await lease_one(client, worker="w4")
    # the cap: the fourth snooze is refused, and the lease still holds the job
    problem = assert_problem(
        await _snooze(client, leased["lease_id"], 0), 409, "snooze_limit_reached"
    )
    assert problem["job_id"] == job["id"] and problem["snoozes"] == 3
    done = await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={"result": 1})
    assert done.status_code == 200, done.text
    finished = done.json()
    assert finished["state"] == "succeeded" and finished["attempt"] == 1
    assert finished["max_attempts"] == 2 and finished["snoozes"] == 3
    outcomes = [(a["attempt"], a["outcome"], a["worker_id"]) for a in finished["attempts"]]
    assert outcomes == [
        (1, "snoozed", "w1"),
        (1, "snoozed", "w2"),
        (1, "snoozed", "w3"),
        (1, "succeeded", "w4"),
    ]


async def test_a_snoozed_job_is_due_again_after_the_seconds_given(
    client: httpx.AsyncClient,
) -> None:
    await enqueue(client)
    leased = await lease_one(client)
    body = (await _snooze(client, leased["lease_id"], 3600)).json()
    due = datetime.fromisoformat(body["run_at"]) - datetime.fromisoformat(body["updated_at"])
    assert timedelta(seconds=3599) < due <= timedelta(seconds=3600)
    assert await lease(client) == []


async def test_a_stale_or_repeated_snooze_is_refused(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    assert (await _snooze(client, token, 0)).status_code == 200
    assert_problem(await _snooze(client, token, 0), 409, "lease_lost")
    assert_problem(await client.post(f"/v1/leases/{token}/complete", json={}), 409, "lease_lost")
    assert_problem(await _snooze(client, "1-" + "0" * 32, 0), 404, "lease_not_found")


async def test_a_job_whose_cancellation_was_asked_is_cancelled_not_snoozed(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    body = (await _snooze(client, token, 10)).json()
    assert body["state"] == "cancelled" and body["finished_at"] is not None
