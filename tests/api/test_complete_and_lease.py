"""Complete-and-lease (`POST /v1/acks` with a `lease`): a worker takes the room its acks
freed in the same call, within `max_running` and `max_running_per_key`; a refused lease
applies no ack; an empty lease waits once the acks are applied. (The slot hand-off to
a waiting lease: tests/api/test_flow_control.py.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers import assert_problem, enqueue, lease

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


def _acks(leases: list[dict[str, Any]], **lease_fields: Any) -> dict[str, Any]:
    """An ack call completing `leases`, leasing with `lease_fields` (none: no lease)."""
    body: dict[str, Any] = {
        "acks": [{"lease_id": x["lease_id"], "outcome": "complete"} for x in leases]
    }
    if lease_fields:
        body["lease"] = {"worker_id": "w2", **lease_fields}
    return body


async def _limit(client: httpx.AsyncClient, queue: str, **limits: Any) -> None:
    response = await client.put(f"/v1/queues/{queue}/settings", json=limits)
    assert response.status_code == 200, response.text


async def test_the_acks_free_the_slots_the_same_call_leases(client: httpx.AsyncClient) -> None:
    await _limit(client, "enc", max_running=2)
    jobs = [(await enqueue(client, "enc"))["id"] for _ in range(5)]
    first = await lease(client, "enc", max_jobs=5)
    assert [x["job"]["id"] for x in first] == jobs[:2]

    answer = await client.post("/v1/acks", json=_acks(first, queues=["enc"], max_jobs=5))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [(r["job_id"], r["status"], r["state"]) for r in body["results"]] == [
        (jobs[0], 200, "succeeded"),
        (jobs[1], 200, "succeeded"),
    ]
    assert [x["job"]["id"] for x in body["leases"]] == jobs[2:4]  # the limit's room, no more
    assert {x["job"]["worker_id"] for x in body["leases"]} == {"w2"}
    assert answer.headers["Jobq-Throttled"] == "max_running"

    plain = await client.post("/v1/acks", json=_acks(body["leases"]))
    assert plain.json()["leases"] is None  # no lease asked
    assert "Jobq-Throttled" not in plain.headers


async def test_a_key_at_its_limit_gets_its_next_job_only_when_its_own_finished(
    client: httpx.AsyncClient,
) -> None:
    await _limit(client, "mail", max_running_per_key=1)
    for key in ("a", "a", "a", "b", "b"):
        await enqueue(client, "mail", concurrency_key=key)
    first = await lease(client, "mail", max_jobs=5)
    by_key = {x["job"]["concurrency_key"]: x for x in first}
    assert sorted(by_key) == ["a", "b"]

    answer = await client.post("/v1/acks", json=_acks([by_key["a"]], queues=["mail"], max_jobs=5))
    leased = answer.json()["leases"]
    assert [x["job"]["concurrency_key"] for x in leased] == ["a"]  # b's one still runs
    assert answer.headers["Jobq-Throttled"] == "max_running_per_key"


async def test_a_lease_that_cannot_be_asked_applies_no_ack(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue(client, "q")
    (held,) = await lease(client, "q")
    for lease_fields, field in (
        ({"queues": ["q"], "max_jobs": 101}, "max_jobs"),
        ({"queues": ["q"], "lease_seconds": 10**7}, "lease_seconds"),
        ({"queues": []}, "queues"),
    ):
        refused = await client.post("/v1/acks", json=_acks([held], **lease_fields))
        problem = assert_problem(refused, 422, "validation_error")
        assert field in str(problem), problem
    assert await db.fetchval("SELECT state::text FROM jobq.jobs") == "running"


async def test_an_empty_lease_waits_after_the_acks_are_applied(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue(client, "w")
    (held,) = await lease(client, "w")
    call = asyncio.create_task(
        client.post("/v1/acks", json=_acks([held], queues=["w"], wait_seconds=10))
    )
    deadline = time.monotonic() + 10
    while await db.fetchval("SELECT state::text FROM jobq.jobs") != "succeeded":
        assert time.monotonic() < deadline and not call.done()
        await asyncio.sleep(0.05)
    later = await enqueue(client, "w")
    answer = await call
    assert answer.json()["results"][0]["status"] == 200
    assert [x["job"]["id"] for x in answer.json()["leases"]] == [later["id"]]


async def test_only_a_limit_on_running_jobs_has_its_freed_slots_announced(
    client: httpx.AsyncClient, database_url: str
) -> None:
    """Finishing a job frees a slot only where running jobs are limited: a fair queue
    without that limit (or one limited by rate alone) announces nothing to waiters."""
    heard: list[str] = []
    listener = await asyncpg.connect(database_url.replace("+asyncpg", ""))
    try:
        await listener.add_listener("jobq_due", lambda *args: heard.append(args[3]))
        await _limit(client, "fairfree", ordering="fair")
        await _limit(client, "rated", rate_limit={"jobs": 100, "per_seconds": 1})
        await _limit(client, "bounded", max_running=5)
        for queue in ("fairfree", "rated", "bounded"):
            await enqueue(client, queue, fairness_key="k")
            leased = await lease(client, queue)
            heard.clear()
            answer = await client.post("/v1/acks", json=_acks(leased))
            assert answer.status_code == 200, answer.text
            await asyncio.sleep(0.2)  # an announcement would have arrived by now
            announced = [payload.split(" ")[0] for payload in heard]
            assert announced == (["bounded"] if queue == "bounded" else []), (queue, heard)
    finally:
        await listener.close()
