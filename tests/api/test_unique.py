"""Uniqueness windows: `unique` options at enqueue (key, period, states, on_conflict)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest

from app.jobs.rows import UNIQUE_STATE_BITS
from tests.helpers import assert_problem, enqueue, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

WHILE_UNFINISHED = ["waiting", "queued", "running"]


async def _post(client: httpx.AsyncClient, **job: Any) -> httpx.Response:
    return await client.post("/v1/queues/default/jobs", json={"type": "task", **job})


async def test_a_held_key_is_answered_with_200_and_the_job_shows_its_uniqueness(
    client: httpx.AsyncClient,
) -> None:
    first = await _post(client, payload=1, unique={"key": "k", "period": 3600})
    again = await _post(client, payload=2, unique={"key": "k", "period": 3600})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["payload"] == 1
    assert (again.json()["deduplicated"], again.json()["replaced"]) == (True, False)
    unique = first.json()["unique"]
    assert (unique["key"], unique["period"]) == ("k", 3600)
    assert unique["since"].endswith(":00:00Z")  # the clock hour it was enqueued in
    assert unique["states"] == ["waiting", "queued", "running", "succeeded"]
    shown = (await client.get(f"/v1/jobs/{first.json()['id']}")).json()
    assert shown["unique"] == unique
    plain = await enqueue(client)
    assert plain["unique"] is None


async def test_unique_while_unfinished_allows_a_new_job_once_the_old_one_finished(
    client: httpx.AsyncClient,
) -> None:
    unique = {"key": "sync", "states": WHILE_UNFINISHED}
    first = await enqueue(client, unique=unique)
    assert (await enqueue(client, unique=unique))["id"] == first["id"]  # queued
    held = await lease_one(client)
    assert (await enqueue(client, unique=unique))["id"] == first["id"]  # running
    await client.post(f"/v1/leases/{held['lease_id']}/complete", json={})
    after = await _post(client, unique=unique)
    assert after.status_code == 201 and after.json()["id"] != first["id"]


async def test_by_default_a_succeeded_job_holds_its_key_and_a_failed_one_does_not(
    client: httpx.AsyncClient,
) -> None:
    done = await enqueue(client, unique={"key": "done"})
    held = await lease_one(client)
    await client.post(f"/v1/leases/{held['lease_id']}/complete", json={})
    assert (await _post(client, unique={"key": "done"})).status_code == 200

    failed = await enqueue(client, unique={"key": "failed"}, max_attempts=1)
    held = await lease_one(client)
    await client.post(f"/v1/leases/{held['lease_id']}/fail", json={"error": {"type": "E"}})
    assert (await client.get(f"/v1/jobs/{failed['id']}")).json()["state"] == "failed"
    new = await _post(client, unique={"key": "failed"})
    assert new.status_code == 201 and new.json()["id"] not in (done["id"], failed["id"])


async def test_replace_debounces_rapid_enqueues_into_one_job_with_the_last_payload(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    unique = {"key": "doc-7", "on_conflict": "replace"}
    answers = [
        await _post(client, payload={"n": n}, delay_seconds=30, unique=unique) for n in range(100)
    ]
    assert answers[0].status_code == 201
    assert {a.status_code for a in answers[1:]} == {200}
    assert all(a.json()["replaced"] and a.json()["deduplicated"] for a in answers[1:])
    rows = await db.fetch("SELECT payload, run_at - now() AS wait FROM jobq.jobs")
    assert len(rows) == 1
    assert rows[0]["payload"] == '{"n": 99}'
    assert rows[0]["wait"].total_seconds() > 25  # the last enqueue's delay, not the first's


async def test_replace_answers_a_running_job_as_it_is(client: httpx.AsyncClient) -> None:
    unique = {"key": "r", "on_conflict": "replace"}
    await enqueue(client, payload="first", unique=unique)
    await lease_one(client)
    again = await _post(client, payload="second", unique=unique)
    assert again.status_code == 200
    assert (again.json()["payload"], again.json()["replaced"]) == ("first", False)


async def test_concurrent_enqueues_of_one_key_make_one_job(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    answers = await asyncio.gather(
        *(_post(client, payload=n, unique={"key": "race"}) for n in range(32))
    )
    assert sorted(a.status_code for a in answers) == [200] * 31 + [201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1


async def test_a_batch_answers_each_job_made_held_or_replaced(client: httpx.AsyncClient) -> None:
    await enqueue(client, unique={"key": "a"})
    response = await client.post(
        "/v1/queues/default/jobs/batch",
        json={
            "jobs": [
                {"type": "task", "unique": {"key": "a"}},
                {"type": "task", "unique": {"key": "a", "on_conflict": "replace"}},
                {"type": "task", "unique": {"key": "b"}},
                {"type": "task", "unique": {"key": "b"}},
            ]
        },
    )
    assert response.status_code == 201
    items = [(j["deduplicated"], j["replaced"]) for j in response.json()["jobs"]]
    assert items == [(True, False), (True, True), (False, False), (True, False)]


@pytest.mark.parametrize(
    "unique",
    [
        {"key": ""},
        {"period": 60},
        {"key": "k", "period": 0},
        {"key": "k", "states": ["queued", "running"]},
        {"key": "k", "states": []},
        {"key": "k", "on_conflict": "update"},
        {"key": "k", "extra": 1},
    ],
)
async def test_bad_unique_options_are_refused(
    client: httpx.AsyncClient, unique: dict[str, Any]
) -> None:
    assert_problem(await _post(client, unique=unique), 422, "validation_error")


async def test_retrying_a_job_whose_uniqueness_another_holds_is_refused(
    client: httpx.AsyncClient,
) -> None:
    unique = {"key": "once", "states": WHILE_UNFINISHED}
    old = await enqueue(client, unique=unique)
    await client.post(f"/v1/jobs/{old['id']}/cancel")
    new = await enqueue(client, unique=unique)
    assert new["id"] != old["id"]
    body = assert_problem(await client.post(f"/v1/jobs/{old['id']}/retry"), 409, "unique_held")
    assert body["job_id"] == old["id"]
    await client.post(f"/v1/jobs/{new['id']}/cancel")
    retried = await client.post(f"/v1/jobs/{old['id']}/retry")
    assert retried.status_code == 200 and retried.json()["state"] == "queued"


async def test_the_views_state_bits_are_the_databases(db: asyncpg.Connection) -> None:
    rows = await db.fetch(
        "SELECT s::text, jobq.unique_state_bit(s) FROM unnest(enum_range(NULL::jobq.job_state)) s"
    )
    assert {row[0]: row[1] for row in rows} == UNIQUE_STATE_BITS
