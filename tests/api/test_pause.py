"""Pausing a queue stops leasing from it, not enqueueing; resuming (and retrying) wakes
the lease requests waiting there; the claim keeps its index."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.jobs.repository import LEASE
from app.jobs.wakeups import Wakeups
from tests.helpers import assert_problem, enqueue, lease, lease_one
from tests.statements import args_of


@pytest.fixture(autouse=True)
async def _no_queue_settings(db: asyncpg.Connection) -> AsyncIterator[None]:
    """Paused queues must not leak into other tests (the shared fixture empties jobs only)."""
    await db.execute("TRUNCATE jobq.queues")
    yield
    await db.execute("TRUNCATE jobq.queues")


async def _pause(client: httpx.AsyncClient, queue: str, action: str = "pause") -> dict[str, Any]:
    response = await client.post(f"/v1/queues/{queue}/{action}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _waiting_client(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> httpx.AsyncClient:
    """A client whose app re-checks too rarely to explain a quick wake-up, once listening."""
    app = app_factory(longpoll_recheck_seconds=30, longpoll_poll_seconds=30)
    client: httpx.AsyncClient = await client_factory(app)
    wakeups: Wakeups = app.state.services.wakeups
    for _ in range(200):
        if wakeups.listening:
            return client
        await asyncio.sleep(0.05)
    raise AssertionError("the listener never came up")


async def _timed_lease(client: httpx.AsyncClient, *queues: str, wait: float) -> tuple[Any, float]:
    started = time.monotonic()
    leased = await lease(client, *queues, wait_seconds=wait)
    return leased, time.monotonic() - started


async def test_a_paused_queue_is_not_leased_from_but_others_are(
    client: httpx.AsyncClient,
) -> None:
    await enqueue(client, "mail")
    sms = await enqueue(client, "sms")
    paused = await _pause(client, "mail")
    assert paused["queue"] == "mail" and paused["paused"] is True
    assert paused["paused_at"] is not None
    assert await lease(client, "mail") == []
    leased = await lease(client, "mail", "sms", max_jobs=10)
    assert [item["job"]["id"] for item in leased] == [sms["id"]]
    # Enqueueing still works.
    late = await client.post("/v1/queues/mail/jobs", json={"type": "t"})
    assert late.status_code == 201 and late.json()["state"] == "queued"
    assert await lease(client, "mail", max_jobs=10) == []


async def test_pausing_again_keeps_the_time_and_resume_lets_leasing_go_on(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, "mail")
    first = await _pause(client, "mail")
    second = await _pause(client, "mail")
    assert second == first
    resumed = await _pause(client, "mail", "resume")
    assert resumed == {"queue": "mail", "paused": False, "paused_at": None}
    assert [item["job"]["id"] for item in await lease(client, "mail")] == [job["id"]]
    row = await db.fetchrow("SELECT paused, paused_at FROM jobq.queues WHERE name = 'mail'")
    assert row is not None and (row["paused"], row["paused_at"]) == (False, None)
    paused_again = await _pause(client, "mail")
    assert datetime.fromisoformat(paused_again["paused_at"]) > datetime.fromisoformat(
        first["paused_at"]
    )


async def test_resuming_a_queue_that_was_never_paused_changes_nothing(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    resumed = await _pause(client, "fresh", "resume")
    assert resumed == {"queue": "fresh", "paused": False, "paused_at": None}
    assert await db.fetchval("SELECT count(*) FROM jobq.queues") == 0


async def test_queue_names_are_checked(client: httpx.AsyncClient) -> None:
    for action in ("pause", "resume", "purge", "failed/retry"):
        response = await client.post(f"/v1/queues/bad%20name/{action}", json={"confirm": "x"})
        assert_problem(response, 422, "validation_error")


async def test_jobs_running_when_paused_can_still_finish(client: httpx.AsyncClient) -> None:
    await enqueue(client, "mail")
    held = await lease_one(client, "mail")
    await _pause(client, "mail")
    beat = await client.post(f"/v1/leases/{held['lease_id']}/heartbeat")
    assert beat.status_code == 200
    done = await client.post(f"/v1/leases/{held['lease_id']}/complete")
    assert done.json()["state"] == "succeeded"


async def test_a_long_poll_on_a_paused_queue_waits_and_resume_wakes_it(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    client = await _waiting_client(app_factory, client_factory)
    await _pause(client, "mail")
    job = await enqueue(client, "mail")
    waiting = asyncio.create_task(_timed_lease(client, "mail", wait=5))
    await asyncio.sleep(0.3)
    await enqueue(client, "mail")  # the announcement wakes it; the queue is still paused
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await _pause(client, "mail", "resume")
    leased, elapsed = await waiting
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert 0.6 <= elapsed < 2


async def test_a_long_poll_on_a_paused_queue_ends_empty(client: httpx.AsyncClient) -> None:
    await enqueue(client, "mail")
    await _pause(client, "mail")
    leased, elapsed = await _timed_lease(client, "mail", wait=0.5)
    assert leased == [] and 0.45 < elapsed < 3


async def test_a_resume_by_another_process_wakes_the_waiter(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    waiter = await _waiting_client(app_factory, client_factory)
    operator = await _waiting_client(app_factory, client_factory)
    await _pause(operator, "mail")
    job = await enqueue(operator, "mail")
    waiting = asyncio.create_task(_timed_lease(waiter, "mail", wait=5))
    await asyncio.sleep(0.3)
    await _pause(operator, "mail", "resume")
    leased, elapsed = await waiting
    assert [item["job"]["id"] for item in leased] == [job["id"]] and elapsed < 2


@pytest.mark.parametrize("how", ["retry", "redrive"])
async def test_a_retry_wakes_a_waiting_lease(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any], how: str
) -> None:
    client = await _waiting_client(app_factory, client_factory)
    job = await enqueue(client, "mail")
    held = await lease_one(client, "mail")
    await client.post(
        f"/v1/leases/{held['lease_id']}/fail", json={"error": {"type": "E"}, "retryable": False}
    )
    waiting = asyncio.create_task(_timed_lease(client, "mail", wait=5))
    await asyncio.sleep(0.3)
    if how == "retry":
        response = await client.post(f"/v1/jobs/{job['id']}/retry")
    else:
        response = await client.post("/v1/queues/mail/failed/retry")
    assert response.status_code == 200, response.text
    leased, elapsed = await waiting
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert 0.3 <= elapsed < 2


async def test_the_claim_still_uses_its_index_with_paused_queues(
    db: asyncpg.Connection,
) -> None:
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds, state,
                               finished_at)
        SELECT 'q' || (i % 20), 't', '{}', 5, 60,
               CASE WHEN i % 3 = 0 THEN 'queued' ELSE 'succeeded' END::jobq.job_state,
               CASE WHEN i % 3 = 0 THEN NULL ELSE now() END
          FROM generate_series(1, 6000) AS i
        """
    )
    await db.execute(
        "INSERT INTO jobq.queues (name, paused, paused_at)"
        " SELECT 'q' || i, i % 2 = 0, now() FROM generate_series(0, 9) AS i"
    )
    await db.execute("ANALYZE jobq.jobs")
    await db.execute("ANALYZE jobq.queues")
    params = {
        "queues": ["q1", "q2", "q3", "q15"],
        "types": [],
        "max_jobs": 10,
        "lease_seconds": None,
        "worker_id": "w",
        "key_id": None,
    }
    plan = "\n".join(
        row[0] for row in await db.fetch("EXPLAIN " + LEASE.sql, *args_of(LEASE, params))
    )
    assert "jobs_claim_idx" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    # And it is right: q2 is paused, the others are not.
    rows = await db.fetch(LEASE.sql, *args_of(LEASE, params))
    assert len(rows) == 10 and {row["queue"] for row in rows} <= {"q1", "q3", "q15"}
    params["queues"] = ["q2", "q4"]
    assert await db.fetch(LEASE.sql, *args_of(LEASE, params)) == []
