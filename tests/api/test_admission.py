"""Admission control: a queue's optional maximum backlog, and its settings endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.core.config import DEFAULT_QUEUE_FULL_RETRY_AFTER_SECONDS
from app.db.engine import POOL_OVERFLOW
from tests.helpers import assert_problem, enqueue, lease_one


async def _set_max_backlog(client: httpx.AsyncClient, queue: str, value: int | None) -> None:
    response = await client.put(f"/v1/queues/{queue}/settings", json={"max_backlog": value})
    assert response.status_code == 200, response.text
    assert (response.json()["queue"], response.json()["max_backlog"]) == (queue, value)


async def _unfinished(db: asyncpg.Connection, queue: str) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND state IN ('queued', 'running')",
        queue,
    )
    return count


def _assert_queue_full(response: httpx.Response, queue: str, max_backlog: int) -> dict[str, Any]:
    problem = assert_problem(response, 429, "queue_full")
    assert response.headers["retry-after"] == str(DEFAULT_QUEUE_FULL_RETRY_AFTER_SECONDS)
    assert problem["retry_after_seconds"] == DEFAULT_QUEUE_FULL_RETRY_AFTER_SECONDS
    assert (problem["queue"], problem["max_backlog"]) == (queue, max_backlog)
    return problem


# ---- the settings endpoint -----------------------------------------------------------


async def test_a_queue_nobody_configured_has_no_limit(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/queues/fresh/settings")
    assert response.status_code == 200
    assert response.json()["queue"] == "fresh"
    settings = response.json()
    assert settings["ordering"] == "fifo"  # the defaults: fifo, and no limit of any kind
    assert {v for k, v in settings.items() if k not in ("queue", "ordering")} == {None}


async def test_settings_are_set_read_and_cleared(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _set_max_backlog(client, "emails", 100)
    assert (await client.get("/v1/queues/emails/settings")).json()["max_backlog"] == 100
    await _set_max_backlog(client, "emails", 7)
    assert (await client.get("/v1/queues/emails/settings")).json()["max_backlog"] == 7
    assert (await client.get("/v1/queues/other/settings")).json()["max_backlog"] is None
    await _set_max_backlog(client, "emails", None)
    assert (await client.get("/v1/queues/emails/settings")).json()["max_backlog"] is None
    row = await db.fetchrow("SELECT max_backlog, paused FROM jobq.queues WHERE name = 'emails'")
    assert row is not None and row["max_backlog"] is None and row["paused"] is False


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"max_backlog": 0},
        {"max_backlog": -1},
        {"max_backlog": 1_000_001},
        {"max_backlog": 1.5},
        {"max_backlog": True},
        {"max_backlog": "10"},
        {"max_backlog": 10, "paused": True},
    ],
)
async def test_invalid_settings_are_422_and_change_nothing(
    client: httpx.AsyncClient, db: asyncpg.Connection, body: dict[str, Any]
) -> None:
    assert_problem(await client.put("/v1/queues/q/settings", json=body), 422, "validation_error")
    assert await db.fetchval("SELECT count(*) FROM jobq.queues") == 0


# ---- admission -------------------------------------------------------------------------


async def test_a_full_queue_refuses_with_429_until_jobs_finish(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _set_max_backlog(client, "q", 2)
    await enqueue(client, "q")
    await enqueue(client, "q")
    problem = _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 2)
    assert problem["backlog"] == 2
    assert await _unfinished(db, "q") == 2

    held = await lease_one(client, "q")  # running jobs count as unfinished
    _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 2)
    await client.post(f"/v1/leases/{held['lease_id']}/complete")
    await enqueue(client, "q")  # one finished: room for one more
    _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 2)

    await enqueue(client, "elsewhere")  # other queues are not limited
    await _set_max_backlog(client, "q", None)
    await enqueue(client, "q")  # the limit lifted applies at once
    assert await _unfinished(db, "q") == 3


async def test_a_failed_job_waiting_for_its_retry_counts(client: httpx.AsyncClient) -> None:
    await _set_max_backlog(client, "q", 1)
    await enqueue(client, "q")
    held = await lease_one(client, "q")
    failed = await client.post(f"/v1/leases/{held['lease_id']}/fail", json={"error": {"type": "E"}})
    assert failed.json()["state"] == "queued"
    _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 1)


async def test_a_limit_below_the_backlog_refuses_until_it_drains(
    client: httpx.AsyncClient,
) -> None:
    for _ in range(5):
        await enqueue(client, "q")
    await _set_max_backlog(client, "q", 2)
    problem = _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 2)
    assert problem["backlog"] == 2  # counted up to the limit, no further


async def test_an_idempotent_replay_is_answered_even_when_full(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _set_max_backlog(client, "q", 1)
    first = await enqueue(client, "q", idempotency_key="k1")
    replay = await client.post(
        "/v1/queues/q/jobs", json={"type": "t"}, headers={"Idempotency-Key": "k1"}
    )
    assert replay.status_code == 200
    assert (replay.json()["id"], replay.json()["deduplicated"]) == (first["id"], True)
    _assert_queue_full(
        await client.post("/v1/queues/q/jobs", json={"type": "t", "idempotency_key": "k2"}), "q", 1
    )
    # A finished job still answers its key, and does not hold a place in the queue.
    held = await lease_one(client, "q")
    await client.post(f"/v1/leases/{held['lease_id']}/complete")
    again = await client.post("/v1/queues/q/jobs", json={"type": "t", "idempotency_key": "k1"})
    assert (again.status_code, again.json()["state"]) == (200, "succeeded")
    assert await _unfinished(db, "q") == 0


async def test_a_refused_enqueue_is_answered_without_retrying(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await _set_max_backlog(client, "q", 1)
    await enqueue(client, "q")
    repo = app.state.services.jobs.enqueue._repo
    calls: list[str] = []
    real_one, real_many = repo.enqueue_one, repo.enqueue_many

    async def one(*args: Any) -> Any:
        calls.append("one")
        return await real_one(*args)

    async def many(*args: Any) -> Any:
        calls.append("many")
        return await real_many(*args)

    repo.enqueue_one, repo.enqueue_many = one, many
    _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 1)
    batch = {"jobs": [{"type": "t"}]}
    _assert_queue_full(await client.post("/v1/queues/q/jobs/batch", json=batch), "q", 1)
    assert calls == ["one", "many"]  # no retry loop


# ---- batches: all or nothing -----------------------------------------------------------


async def test_a_batch_that_does_not_fit_is_refused_whole(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _set_max_backlog(client, "q", 5)
    for _ in range(3):
        await enqueue(client, "q")
    three = {"jobs": [{"type": "t"}] * 3}
    problem = _assert_queue_full(await client.post("/v1/queues/q/jobs/batch", json=three), "q", 5)
    assert problem["backlog"] == 3 and "3 new jobs" in problem["detail"]
    assert await _unfinished(db, "q") == 3  # nothing of it was inserted
    two = await client.post("/v1/queues/q/jobs/batch", json={"jobs": [{"type": "t"}] * 2})
    assert two.status_code == 201
    assert await _unfinished(db, "q") == 5


async def test_a_batch_counts_only_its_new_jobs(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _set_max_backlog(client, "q", 4)
    batch = {"jobs": [{"type": "t", "idempotency_key": f"k{i}"} for i in range(3)]}
    first = await client.post("/v1/queues/q/jobs/batch", json=batch)
    assert first.status_code == 201
    # Three replays, one key twice and one new job: one new job fits in the last place.
    new = {"type": "t", "idempotency_key": "new"}
    jobs = [*batch["jobs"], new, new]
    second = await client.post("/v1/queues/q/jobs/batch", json={"jobs": jobs})
    assert second.status_code == 201, second.text
    answers = second.json()["jobs"]
    assert [a["deduplicated"] for a in answers] == [True, True, True, False, True]
    assert answers[3]["id"] == answers[4]["id"]
    assert await _unfinished(db, "q") == 4
    # Full now: a replay of the whole first batch still answers, a new job does not fit.
    replay = await client.post("/v1/queues/q/jobs/batch", json=batch)
    assert replay.status_code == 201
    assert [a["id"] for a in replay.json()["jobs"]] == [a["id"] for a in first.json()["jobs"]]
    _assert_queue_full(
        await client.post(
            "/v1/queues/q/jobs/batch", json={"jobs": [*batch["jobs"], {"type": "t"}]}
        ),
        "q",
        4,
    )


# ---- concurrency ---------------------------------------------------------------------------


async def test_concurrent_enqueues_overshoot_by_at_most_the_concurrency(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    pool_size = 3
    app = app_factory(db_pool_size=pool_size)
    client: httpx.AsyncClient = await client_factory(app)
    connections = pool_size + POOL_OVERFLOW  # statements that can run at once
    await _set_max_backlog(client, "q", 10)
    for _ in range(5):
        await enqueue(client, "q")

    async def attempt(i: int) -> int:
        response = await client.post("/v1/queues/q/jobs", json={"type": "t", "payload": i})
        if response.status_code != 201:
            _assert_queue_full(response, "q", 10)
        return response.status_code

    statuses = await asyncio.gather(*(attempt(i) for i in range(60)))
    assert set(statuses) == {201, 429}
    total = await _unfinished(db, "q")
    # Each refusal saw at least 10 committed unfinished jobs; each acceptance saw fewer
    # than 10 plus what the statements running beside it had not committed yet.
    assert 10 <= total <= 10 - 1 + connections, (total, connections)
    assert total == 5 + statuses.count(201)
    _assert_queue_full(await client.post("/v1/queues/q/jobs", json={"type": "t"}), "q", 10)
