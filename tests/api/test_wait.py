"""`GET /v1/jobs/{id}?wait_seconds=N`: the answer comes as soon as the job finishes, woken
by PostgreSQL's NOTIFY, holding no database connection while it waits; or with the job
as it is when the wait ends."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import assert_problem, enqueue, lease_one


async def _listening(app: FastAPI) -> None:
    deadline = time.monotonic() + 10
    while not app.state.services.auth.listening:
        assert time.monotonic() < deadline, "the listener never connected"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("outcome", ["complete", "fail", "cancel"])
async def test_a_wait_ends_as_soon_as_the_job_finishes(
    app: FastAPI, client: httpx.AsyncClient, outcome: str
) -> None:
    await _listening(app)
    job = await enqueue(client, "w", max_attempts=1)
    leased = await lease_one(client, "w")
    waiting = asyncio.create_task(client.get(f"/v1/jobs/{job['id']}", params={"wait_seconds": 20}))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    assert app.state.services.engine.pool.checkedout() == 0  # no connection held while it waits
    started = time.monotonic()
    if outcome == "complete":
        await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={"result": 42})
    elif outcome == "fail":
        body = {"error": {"type": "E"}, "retryable": False}
        await client.post(f"/v1/leases/{leased['lease_id']}/fail", json=body)
    else:
        await client.post(f"/v1/jobs/{job['id']}/cancel")
        await client.post(f"/v1/leases/{leased['lease_id']}/fail", json={"error": {"type": "E"}})
    answer = (await waiting).json()
    assert time.monotonic() - started < 2.0  # woken, not the 5 s re-check
    expected = {"complete": "succeeded", "fail": "failed", "cancel": "cancelled"}[outcome]
    assert answer["state"] == expected
    if outcome == "complete":
        assert answer["result"] == 42


async def test_a_wait_ends_with_the_job_as_it_is(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "w")
    started = time.monotonic()
    answer = await client.get(f"/v1/jobs/{job['id']}", params={"wait_seconds": 0.5})
    assert 0.45 < time.monotonic() - started < 3
    assert answer.status_code == 200 and answer.json()["state"] == "queued"
    # A finished job is answered at once, whatever the wait.
    done = await enqueue(client, "w2")
    leased = await lease_one(client, "w2")
    await client.post(f"/v1/leases/{leased['lease_id']}/complete")
    started = time.monotonic()
    answer = await client.get(f"/v1/jobs/{done['id']}", params={"wait_seconds": 30})
    assert answer.json()["state"] == "succeeded" and time.monotonic() - started < 1


async def test_a_wait_is_bounded_and_checked(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "w")
    for bad in ("31", "-1", "soon"):
        response = await client.get(f"/v1/jobs/{job['id']}", params={"wait_seconds": bad})
        assert_problem(response, 422, "validation_error")
    missing = await client.get("/v1/jobs/999999", params={"wait_seconds": 1})
    assert_problem(missing, 404, "job_not_found")


async def test_a_child_cancelled_through_its_parent_ends_the_wait(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await _listening(app)
    parent = await enqueue(client, "p")
    child = await enqueue(client, "c", depends_on=[parent["id"]])
    waiting = asyncio.create_task(
        client.get(f"/v1/jobs/{child['id']}", params={"wait_seconds": 20})
    )
    await asyncio.sleep(0.3)
    started = time.monotonic()
    await client.post(f"/v1/jobs/{parent['id']}/cancel")  # the child follows, and is announced
    answer = (await waiting).json()
    assert time.monotonic() - started < 2.0
    assert answer["state"] == "cancelled"
    assert answer["last_error"]["type"] == "parent_failed"
