"""The read endpoints the dashboard uses: who is leasing, failed jobs by group, a queue's
last minutes, and the job list's filters (error type, creation time, idempotency key)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from tests.helpers import assert_problem, enqueue, lease


async def _fail(client: httpx.AsyncClient, queue: str, error: str, message: str) -> None:
    (leased,) = await lease(client, queue)
    body = {"error": {"type": error, "message": message}, "retryable": False}
    assert (await client.post(f"/v1/leases/{leased['lease_id']}/fail", json=body)).is_success


async def test_workers_are_the_holders_of_running_jobs(client: httpx.AsyncClient) -> None:
    for queue in ("a", "b", "b"):
        await enqueue(client, queue)
    await lease(client, "a", worker="w-1")
    await lease(client, "b", max_jobs=2, worker="w-2")
    workers = (await client.get("/v1/workers")).json()["workers"]
    assert [(w["worker_id"], w["running"], w["queues"]) for w in workers] == [
        ("w-1", 1, ["a"]),
        ("w-2", 2, ["b"]),
    ]
    seen = datetime.fromisoformat(workers[0]["last_seen"])
    assert abs((datetime.now(UTC) - seen).total_seconds()) < 10
    assert len(workers[1]["job_ids"]) == 2


async def test_failed_groups_biggest_first_with_the_latest_message(
    client: httpx.AsyncClient,
) -> None:
    for _ in range(5):
        await enqueue(client, "mail", type="send", max_attempts=1)
    await enqueue(client, "mail", type="digest", max_attempts=1)
    for n in range(3):
        await _fail(client, "mail", "Bounce", f"bounce {n}")
    await _fail(client, "mail", "Timeout", "slow")
    await _fail(client, "mail", "Timeout", "slower")
    await _fail(client, "mail", "Bounce", "digest bounced")
    groups = (await client.get("/v1/queues/mail/failed/groups")).json()["groups"]
    assert [(g["type"], g["error_type"], g["jobs"]) for g in groups] == [
        ("send", "Bounce", 3),
        ("send", "Timeout", 2),
        ("digest", "Bounce", 1),
    ]
    assert groups[0]["latest_message"] == "bounce 2" and groups[1]["latest_message"] == "slower"


async def test_the_series_counts_each_minute(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    for _ in range(3):
        await enqueue(client, "s")
    (leased,) = await lease(client, "s")
    await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={})
    await db.execute(
        "UPDATE jobq.jobs SET created_at = created_at - interval '5 minutes'"
        " WHERE id = (SELECT max(id) FROM jobq.jobs)"
    )
    minutes = (await client.get("/v1/queues/s/series?minutes=10")).json()["minutes"]
    assert len(minutes) == 10
    assert sum(m["enqueued"] for m in minutes) == 3 and minutes[-1]["succeeded"] == 1
    assert minutes[-6]["enqueued"] == 1  # the one made five minutes earlier
    refused = await client.get("/v1/queues/s/series?minutes=0")
    assert_problem(refused, 422, "validation_error")


async def test_the_job_list_filters_by_error_creation_time_and_key(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    for key in ("order-1", "order-2", "invoice_1", None):
        await enqueue(client, "k", **({"idempotency_key": key} if key else {}))
    await db.execute("UPDATE jobq.jobs SET created_at = now() - interval '2 days' WHERE id = 1")

    async def ids(**query: str) -> list[int]:
        page = (await client.get("/v1/jobs", params={"queue": "k", **query})).json()
        return [job["id"] for job in page["jobs"]]

    assert await ids(key_contains="order") == [1, 2]
    assert await ids(key_contains="_") == [3]  # text, not a LIKE pattern
    day_ago = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    assert await ids(created_after=day_ago) == [2, 3, 4]
    assert await ids(created_before=day_ago) == [1]
    await _fail(client, "k", "Boom", "x")
    assert await ids(error_type="Boom") == [1]
    naive = await client.get("/v1/jobs", params={"created_after": "2026-01-01T00:00:00"})
    assert_problem(naive, 422, "validation_error")
