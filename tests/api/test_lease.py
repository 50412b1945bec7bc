"""Workers leasing jobs: order, filters, attempts, and concurrent claimers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from app.db.database import Database
from app.db.engine import create_engine
from app.jobs.repository import JobsRepository
from app.jobs.schemas import EnqueuedJob, HeartbeatOut, JobOut, LeasesOut
from app.maintenance import Reaper
from tests.helpers import enqueue, lease, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

CLAIMERS = 12


async def test_highest_priority_first_then_oldest(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    low = await enqueue(client, priority=-5)
    mid_old = await enqueue(client, priority=3)
    mid_new = await enqueue(client, priority=3)
    high = await enqueue(client, priority=100)
    await db.execute(
        "UPDATE jobq.jobs SET run_at = now() - interval '1 minute' WHERE id = $1", mid_new["id"]
    )  # older run_at wins a priority tie
    leased = await lease(client, max_jobs=10)
    assert [item["job"]["id"] for item in leased] == [
        high["id"],
        mid_new["id"],
        mid_old["id"],
        low["id"],
    ]


async def test_priority_orders_jobs_across_queues(client: httpx.AsyncClient) -> None:
    await enqueue(client, "a", priority=1)
    urgent = await enqueue(client, "b", priority=9)
    (first,) = await lease(client, "a", "b", max_jobs=1)
    assert first["job"]["id"] == urgent["id"]


async def test_equal_priority_and_run_at_come_out_in_id_order(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    run_at = (datetime.now(UTC) - timedelta(seconds=10)).isoformat()
    jobs = [await enqueue(client, queue, priority=4, run_at=run_at) for queue in "babab"]
    assert len({job["run_at"] for job in jobs}) == 1
    # Rewrite the oldest rows, so the table no longer holds them in id order.
    await db.execute(
        "UPDATE jobq.jobs SET metadata = '{\"moved\": true}' WHERE id = ANY($1::bigint[])",
        [job["id"] for job in jobs[:2]],
    )
    leased = [(await lease_one(client, "a", "b"))["job"]["id"] for _ in jobs]
    assert leased == [job["id"] for job in jobs]


async def test_lease_marks_running_and_counts_the_attempt(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, lease_seconds=120)
    before = datetime.now(UTC)
    item = await lease_one(client, worker="worker-7")
    assert item["job"]["id"] == job["id"]
    assert item["job"]["state"] == "running" and item["job"]["attempt"] == 1
    assert item["job"]["worker_id"] == "worker-7"
    expires = datetime.fromisoformat(item["expires_at"])
    assert before + timedelta(seconds=115) < expires < before + timedelta(seconds=125)
    assert item["lease_id"].startswith(f"{job['id']}-")
    assert "lease_id" not in (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert await lease(client) == []


async def test_lease_seconds_in_the_request_override_the_job(client: httpx.AsyncClient) -> None:
    await enqueue(client, lease_seconds=600)
    before = datetime.now(UTC)
    item = await lease_one(client, lease_seconds=5)
    assert datetime.fromisoformat(item["expires_at"]) < before + timedelta(seconds=10)


async def test_queues_and_types_filter(client: httpx.AsyncClient) -> None:
    a = await enqueue(client, "a", type="resize")
    b = await enqueue(client, "b", type="email")
    await enqueue(client, "c", type="resize")
    assert {x["job"]["id"] for x in await lease(client, "a", "b", max_jobs=10)} == {
        a["id"],
        b["id"],
    }
    c2 = await enqueue(client, "c", type="email")
    only_email = await lease(client, "c", max_jobs=10, types=["email"])
    assert [x["job"]["id"] for x in only_email] == [c2["id"]]


async def test_max_jobs_caps_the_batch(client: httpx.AsyncClient) -> None:
    for _ in range(5):
        await enqueue(client)
    assert len(await lease(client, max_jobs=3)) == 3
    assert len(await lease(client, max_jobs=3)) == 2
    assert await lease(client, max_jobs=3) == []


async def test_each_lease_gets_a_new_token(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    await enqueue(client, max_attempts=3)
    first = await lease_one(client)
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 s'")
    assert (await reaper.run_once()).requeued == 1
    await db.execute("UPDATE jobq.jobs SET run_at = now()")
    second = await lease_one(client)
    assert second["lease_id"] != first["lease_id"]
    assert second["job"]["attempt"] == 2


async def _drain(repo: JobsRepository, seen: list[int], batch: int) -> None:
    while rows := await repo.lease(["race"], [], batch, None, "w"):
        seen.extend(row.id for row in rows)


async def test_concurrent_claimers_on_separate_connections_get_disjoint_jobs(
    client: httpx.AsyncClient, database_url: str
) -> None:
    jobs = [{"type": "t"} for _ in range(1000)]
    for _ in range(3):
        assert (
            await client.post("/v1/queues/race/jobs/batch", json={"jobs": jobs})
        ).status_code == 201
    engines = [create_engine(database_url, pool_size=1) for _ in range(CLAIMERS)]
    try:
        seen: list[int] = []
        await asyncio.gather(
            *(_drain(JobsRepository(Database(e)), seen, 1 + n % 7) for n, e in enumerate(engines))
        )
    finally:
        await asyncio.gather(*(e.dispose() for e in engines))
    duplicates = [job_id for job_id, count in Counter(seen).items() if count > 1]
    assert duplicates == []
    assert len(seen) == 3000


@pytest.mark.no_pgbouncer("it counts the server connections its claims ran on: PgBouncer has two")
async def test_concurrent_lease_requests_over_http_get_disjoint_jobs(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    client: httpx.AsyncClient = await client_factory(app_factory(db_pool_size=CLAIMERS))
    await client.post("/v1/queues/race/jobs/batch", json={"jobs": [{"type": "t"}] * 500})

    async def worker(name: str) -> list[int]:
        got: list[int] = []
        while leased := await lease(client, "race", max_jobs=5, worker=name):
            got.extend(item["job"]["id"] for item in leased)
        return got

    results = await asyncio.gather(*(worker(f"w{n}") for n in range(CLAIMERS)))
    everything = [job_id for got in results for job_id in got]
    assert len(everything) == len(set(everything)) == 500
    connections = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'jobq'"
        " AND datname = current_database()"
    )
    assert connections >= 8  # the claims really ran on many connections at once


async def test_the_lease_answer_is_exactly_what_its_schema_serializes(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    # The lease route serializes its answer without validating it; validating it and
    # serializing it again must change nothing: same fields, same formats, no secrets.
    payloads = [
        {"text": "naïve — 日本語 \u2028", "big": 10**30, "float": 0.1, "nested": [[{"a": None}]]},
        "a string",
        [1, 2.5, True, None],
        None,
    ]
    for payload in payloads:
        await enqueue(client, payload=payload, metadata={"tenant": "ü"}, max_attempts=3)
    leased = (await client.post("/v1/leases", json=_lease_all())).json()["leases"]
    first = leased[0]["lease_id"]
    progress = {"progress": {"percent": 12.5, "stage": "s", "message": "m"}}
    assert (await client.post(f"/v1/leases/{first}/heartbeat", json=progress)).status_code == 200
    failure = {
        "error": {"type": "E", "message": "boom", "details": {"x": [1]}},
        "retry_after_seconds": 0,
    }
    assert (await client.post(f"/v1/leases/{first}/fail", json=failure)).status_code == 200
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 s'")
    assert (await reaper.run_once()).requeued == len(payloads) - 1
    await db.execute("UPDATE jobq.jobs SET run_at = now()")

    response = await client.post("/v1/leases", json=_lease_all())
    assert response.headers["content-type"] == "application/json"
    answer = response.json()["leases"]
    assert len(answer) == len(payloads)
    outcomes = sorted(a["outcome"] for lease in answer for a in lease["job"]["attempts"])
    assert outcomes == ["failed"] + ["lease_expired"] * (len(payloads) - 1)
    assert all("lease_id" not in a for lease in answer for a in lease["job"]["attempts"])
    validated = LeasesOut.model_validate_json(response.content)
    assert response.content == validated.model_dump_json().encode()


async def test_job_answers_are_exactly_what_their_schemas_serialize(
    client: httpx.AsyncClient,
) -> None:
    # Enqueue, heartbeat, complete and fail serialize their answers without validating
    # them (as the lease route does): validating each and serializing it again changes
    # nothing.
    def unchanged(response: httpx.Response, schema: type[BaseModel], status: int) -> None:
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        assert (
            response.content
            == schema.model_validate_json(response.content).model_dump_json().encode()
        )

    job = {"type": "t", "payload": {"text": "naïve — 日本語", "big": 10**30, "f": 0.1},
           "metadata": {"tenant": "ü"}, "max_attempts": 2, "priority": -3}  # fmt: skip
    headers = {"Idempotency-Key": "answer-bytes"}
    created = await client.post("/v1/queues/default/jobs", json=job, headers=headers)
    unchanged(created, EnqueuedJob, 201)
    assert created.json()["deduplicated"] is False
    again = await client.post("/v1/queues/default/jobs", json=job, headers=headers)
    unchanged(again, EnqueuedJob, 200)
    assert again.json()["deduplicated"] is True
    assert again.json()["id"] == created.json()["id"]

    first = await lease_one(client)
    progress = {"progress": {"percent": 12.5, "stage": "s", "message": "m"}}
    beat = await client.post(f"/v1/leases/{first['lease_id']}/heartbeat", json=progress)
    unchanged(beat, HeartbeatOut, 200)
    assert beat.json()["progress_recorded"] is True
    failure = {"error": {"type": "E", "message": "boom", "details": {"x": [1]}},
               "retry_after_seconds": 0}  # fmt: skip
    failed = await client.post(f"/v1/leases/{first['lease_id']}/fail", json=failure)
    unchanged(failed, JobOut, 200)
    assert failed.json()["state"] == "queued"
    second = await lease_one(client)
    done = await client.post(
        f"/v1/leases/{second['lease_id']}/complete", json={"result": {"ok": [1, 2.5, None]}}
    )
    unchanged(done, JobOut, 200)
    answer = done.json()
    assert answer["state"] == "succeeded"
    assert answer["result"] == {"ok": [1, 2.5, None]}
    assert [a["outcome"] for a in answer["attempts"]] == ["failed", "succeeded"]
    assert all("lease_id" not in a for a in answer["attempts"])


def _lease_all() -> dict[str, Any]:
    return {"queues": ["default"], "max_jobs": 100, "worker_id": "w"}


async def test_progress_percent_comes_back_as_sent(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    (leased,) = await lease(client, "default")
    third = 200 / 3  # 66.66666666666667: a float32 column made it 66.66666412353516
    beat = {"progress": {"percent": third, "stage": "render"}}
    assert (
        await client.post(f"/v1/leases/{leased['lease_id']}/heartbeat", json=beat)
    ).status_code == 200
    job = (await client.get(f"/v1/jobs/{leased['job']['id']}")).json()
    assert job["progress"]["percent"] == third
