"""Producers: single and batch enqueue, delays, idempotency."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from app.maintenance import Pruner
from tests.helpers import assert_problem, enqueue, lease

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


async def test_enqueue_returns_the_job_with_defaults(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/emails/jobs", json={"type": "send", "payload": {"to": "ada@example.com"}}
    )
    assert response.status_code == 201
    job = response.json()
    assert job["id"] >= 1
    assert (job["queue"], job["type"], job["state"]) == ("emails", "send", "queued")
    assert job["payload"] == {"to": "ada@example.com"}
    assert (job["priority"], job["attempt"], job["max_attempts"]) == (0, 0, 5)
    assert job["lease_seconds"] == 60
    assert job["deduplicated"] is False
    assert job["attempts"] == [] and job["progress"] is None and job["result"] is None


async def test_enqueued_job_is_committed_and_readable(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, "q", payload=[1, 2, 3], metadata={"tenant": "a"}, priority=7)
    row = await db.fetchrow(
        "SELECT queue, priority, state::text FROM jobq.jobs WHERE id = $1", job["id"]
    )
    assert row is not None and tuple(row) == ("q", 7, "queued")
    fetched = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert fetched["payload"] == [1, 2, 3]
    assert fetched["metadata"] == {"tenant": "a"}


async def test_delayed_job_is_not_leased_until_due(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    delayed = await enqueue(client, delay_seconds=3600)
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    scheduled = await enqueue(client, run_at=later)
    assert await lease(client) == []
    assert datetime.fromisoformat(delayed["run_at"]) > datetime.now(UTC) + timedelta(minutes=59)
    await db.execute("UPDATE jobq.jobs SET run_at = now() WHERE id = $1", scheduled["id"])
    (leased,) = await lease(client, max_jobs=10)
    assert leased["job"]["id"] == scheduled["id"]


async def test_run_at_and_delay_are_exclusive(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/q/jobs",
        json={"type": "t", "delay_seconds": 5, "run_at": datetime.now(UTC).isoformat()},
    )
    assert_problem(response, 422, "validation_error")


async def test_same_idempotency_key_returns_the_unfinished_job(client: httpx.AsyncClient) -> None:
    first = await enqueue(client, "q", idempotency_key="order-17")
    again = await client.post(
        "/v1/queues/q/jobs", json={"type": "task", "idempotency_key": "order-17"}
    )
    assert again.status_code == 200
    assert again.json()["id"] == first["id"] and again.json()["deduplicated"] is True
    by_header = await client.post(
        "/v1/queues/q/jobs", json={"type": "task"}, headers={"Idempotency-Key": "order-17"}
    )
    assert by_header.status_code == 200 and by_header.json()["id"] == first["id"]
    other_queue = await enqueue(client, "other", idempotency_key="order-17")
    assert other_queue["id"] != first["id"] and other_queue["deduplicated"] is False


async def test_producers_racing_with_one_key_make_one_job(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    # Each insert waits for the one holding the key to commit, inserts nothing, and
    # answers the job that holds it (the service asks again if that job committed after
    # its statement began).
    body = {"type": "task", "idempotency_key": "order-18"}
    answers = await asyncio.gather(
        *(client.post("/v1/queues/q/jobs", json=body) for _ in range(10))
    )
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] * 9 + [201], [a.text for a in answers]
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert [a.json()["deduplicated"] for a in answers].count(False) == 1
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1


async def test_a_finished_job_keeps_its_key_until_retention_deletes_it(
    client: httpx.AsyncClient, pruner: Pruner, db: asyncpg.Connection
) -> None:
    first = await enqueue(client, "q", idempotency_key="k")
    (held,) = await lease(client, "q")
    assert (await client.post(f"/v1/leases/{held['lease_id']}/complete")).status_code == 200
    retried = await client.post("/v1/queues/q/jobs", json={"type": "task", "idempotency_key": "k"})
    assert retried.status_code == 200  # a producer retrying after a crash gets the same job
    assert retried.json()["id"] == first["id"] and retried.json()["state"] == "succeeded"
    await db.execute("UPDATE jobq.jobs SET finished_at = now() - interval '2 days'")
    assert (await pruner.run_once()).succeeded == 1
    second = await enqueue(client, "q", idempotency_key="k")
    assert second["id"] != first["id"] and second["deduplicated"] is False


async def test_header_and_body_keys_must_agree(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/q/jobs",
        json={"type": "t", "idempotency_key": "a"},
        headers={"Idempotency-Key": "b"},
    )
    body = assert_problem(response, 422, "validation_error")
    assert body["errors"][0]["loc"] == ["body", "idempotency_key"]


async def test_batch_enqueue_answers_in_request_order(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    existing = await enqueue(client, "q", idempotency_key="old")
    jobs = [
        {"type": "a"},
        {"type": "b", "idempotency_key": "new"},
        {"type": "c", "idempotency_key": "old"},
        {"type": "d", "idempotency_key": "new"},
        {"type": "e", "priority": 5, "delay_seconds": 60},
    ]
    response = await client.post("/v1/queues/q/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201
    answer = response.json()["jobs"]
    assert [item["deduplicated"] for item in answer] == [False, False, True, True, False]
    assert answer[2]["id"] == existing["id"]
    assert answer[3]["id"] == answer[1]["id"]
    assert all(item["state"] == "queued" for item in answer)
    types = {
        row["id"]: row["type"]
        for row in await db.fetch("SELECT id, type FROM jobq.jobs WHERE queue = 'q'")
    }
    assert len(types) == 4  # existing + a, b, e
    assert [types[item["id"]] for item in answer] == ["a", "b", "task", "b", "e"]


async def test_batch_of_a_thousand(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    jobs = [{"type": "t", "payload": {"n": n}} for n in range(1000)]
    response = await client.post("/v1/queues/bulk/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201
    ids = [item["id"] for item in response.json()["jobs"]]
    assert len(set(ids)) == 1000
    rows = await db.fetch("SELECT id, (payload->>'n')::int AS n FROM jobq.jobs")
    by_id = {row["id"]: row["n"] for row in rows}
    assert [by_id[i] for i in ids] == list(range(1000))


async def test_get_and_list_jobs(client: httpx.AsyncClient) -> None:
    ids = [(await enqueue(client, "a" if n % 2 else "b", type=f"t{n % 3}"))["id"] for n in range(7)]
    page = (await client.get("/v1/jobs", params={"limit": 3})).json()
    assert [j["id"] for j in page["jobs"]] == ids[:3] and page["next_after"] == ids[2]
    rest = (await client.get("/v1/jobs", params={"limit": 3, "after": ids[2]})).json()
    assert [j["id"] for j in rest["jobs"]] == ids[3:6]
    last = (await client.get("/v1/jobs", params={"limit": 3, "after": ids[5]})).json()
    assert [j["id"] for j in last["jobs"]] == ids[6:] and last["next_after"] is None
    only_a = (await client.get("/v1/jobs", params={"queue": "a"})).json()["jobs"]
    assert [j["id"] for j in only_a] == ids[1::2]
    t0 = (await client.get("/v1/jobs", params={"type": "t0", "state": "queued"})).json()["jobs"]
    assert [j["id"] for j in t0] == ids[0::3]
    none = (await client.get("/v1/jobs", params={"state": "failed"})).json()
    assert none == {"jobs": [], "next_after": None}
    assert_problem(await client.get("/v1/jobs/123456789"), 404, "job_not_found")
