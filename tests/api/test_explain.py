"""`GET /v1/jobs/{id}/explain`: every reason a job is not running, one test a reason,
and a property: a job explain calls leasable is taken by the next lease of its queue."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key, enqueue, lease, put_settings

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


async def _explain(client: httpx.AsyncClient, job_id: int) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job_id}/explain")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _codes(body: dict[str, Any], blocking: bool | None = None) -> set[str]:
    return {r["code"] for r in body["reasons"] if blocking is None or r["blocking"] == blocking}


def _reason(body: dict[str, Any], code: str) -> dict[str, Any]:
    (found,) = [r for r in body["reasons"] if r["code"] == code]
    result: dict[str, Any] = found
    return result


async def test_a_due_job_of_a_served_queue_is_leasable(client: httpx.AsyncClient) -> None:
    await enqueue(client, "mail")
    await lease(client, "mail")  # a worker leased this queue and type just now
    job = await enqueue(client, "mail")
    body = await _explain(client, job["id"])
    assert body["leasable"] is True and body["reasons"] == []
    assert body["state"] == "queued" and body["queue"] == "mail"


async def test_scheduled_for_later_says_when(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "mail", delay_seconds=600)
    body = await _explain(client, job["id"])
    assert body["leasable"] is False
    assert _reason(body, "scheduled")["until"] == job["run_at"]


async def test_waiting_for_parents_names_them_and_their_states(
    client: httpx.AsyncClient,
) -> None:
    parent = await enqueue(client, "mail")
    child = await enqueue(client, "mail", depends_on=[parent["id"]])
    body = await _explain(client, child["id"])
    reason = _reason(body, "waiting_for_parents")
    assert reason["blocking"] and reason["count"] == 1
    assert reason["parents"] == [
        {"id": parent["id"], "queue": "mail", "type": "task", "state": "queued"}
    ]


async def test_a_paused_queue(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "mail")
    assert (await client.post("/v1/queues/mail/pause")).status_code == 200
    body = await _explain(client, job["id"])
    assert "paused" in _codes(body, blocking=True) and not body["leasable"]


async def test_a_queue_at_max_running(client: httpx.AsyncClient) -> None:
    await put_settings(client, "enc", max_running=1)
    await enqueue(client, "enc")
    await lease(client, "enc")
    job = await enqueue(client, "enc")
    reason = _reason(await _explain(client, job["id"]), "max_running")
    assert reason["blocking"] and reason["count"] == 1 and reason["limit"] == 1


async def test_a_key_at_max_running_per_key(client: httpx.AsyncClient) -> None:
    await put_settings(client, "keyed", max_running_per_key=1)
    await enqueue(client, "keyed", concurrency_key="acme")
    await lease(client, "keyed")
    job = await enqueue(client, "keyed", concurrency_key="acme")
    other = await enqueue(client, "keyed", concurrency_key="globex")
    reason = _reason(await _explain(client, job["id"]), "max_running_per_key")
    assert reason["blocking"] and reason["count"] == 1 and reason["limit"] == 1
    assert "max_running_per_key" not in _codes(await _explain(client, other["id"]))


async def test_a_used_rate_limit_says_when_it_frees(client: httpx.AsyncClient) -> None:
    await put_settings(client, "rated", rate_limit={"jobs": 1, "per_seconds": 60})
    await enqueue(client, "rated")
    await lease(client, "rated")
    job = await enqueue(client, "rated")
    reason = _reason(await _explain(client, job["id"]), "rate_limit")
    assert reason["blocking"] and reason["count"] == 1 and reason["until"] is not None


async def test_a_fair_key_at_its_rate_limit_per_key(client: httpx.AsyncClient) -> None:
    await put_settings(
        client, "fair", ordering="fair", rate_limit_per_key={"jobs": 1, "per_seconds": 60}
    )
    await enqueue(client, "fair", fairness_key="a")
    await lease(client, "fair")
    job = await enqueue(client, "fair", fairness_key="a")
    other = await enqueue(client, "fair", fairness_key="b")
    reason = _reason(await _explain(client, job["id"]), "rate_limit_per_key")
    assert reason["blocking"] and reason["until"] is not None
    assert "rate_limit_per_key" not in _codes(await _explain(client, other["id"]))


async def test_behind_jobs_of_higher_priority_counts_them(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        await enqueue(client, "busy", priority=5)
    job = await enqueue(client, "busy", priority=1)
    reason = _reason(await _explain(client, job["id"]), "behind")
    assert reason["count"] == 3 and not reason["more"] and not reason["blocking"]
    assert "3 of higher priority" in reason["message"]


async def test_behind_more_jobs_than_are_counted(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, "deep", priority=-5)
    await db.execute(
        "INSERT INTO jobq.jobs (id, queue, type, payload, max_attempts, lease_seconds)"
        " SELECT nextval('jobq.jobs_id_seq'), 'deep', 'task', '{}', 3, 60"
        "   FROM generate_series(1, 1200)"
    )
    reason = _reason(await _explain(client, job["id"]), "behind")
    assert reason["count"] == 1000 and reason["more"] is True


async def test_no_worker_has_leased_the_queue_or_the_type_lately(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, "idle", type="resize")
    assert _reason(await _explain(client, job["id"]), "no_worker")["blocking"] is False
    await enqueue(client, "idle", type="other")
    await lease(client, "idle", types=["other"])
    await db.execute(
        "UPDATE jobq.queue_types SET last_leased_at = now() - interval '1 hour'"
        " WHERE type = 'resize'"
    )
    assert "no_worker_for_type" in _codes(await _explain(client, job["id"]))


async def test_a_start_deadline_is_said_and_once_passed_blocks(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue(client, "soon")
    await lease(client, "soon")  # served: only the deadline is said
    start_by = (datetime.now(UTC) + timedelta(minutes=10)).isoformat()
    job = await enqueue(client, "soon", start_by=start_by)
    body = await _explain(client, job["id"])
    reason = _reason(body, "start_by")
    assert reason["blocking"] is False and body["leasable"] is True
    assert datetime.fromisoformat(reason["until"]) == datetime.fromisoformat(start_by)
    await db.execute(
        "UPDATE jobq.jobs SET start_by = now() - interval '1 second' WHERE id = $1", job["id"]
    )
    body = await _explain(client, job["id"])
    assert _codes(body, blocking=True) == {"start_by_passed"} and not body["leasable"]
    assert await lease(client, "soon") == []  # as explain says: no lease takes it


async def test_a_snoozed_job_says_it_was_snoozed(client: httpx.AsyncClient) -> None:
    await enqueue(client, "nap")
    leased = (await lease(client, "nap"))[0]
    response = await client.post(f"/v1/leases/{leased['lease_id']}/snooze", json={"seconds": 600})
    assert response.status_code == 200, response.text
    reason = _reason(await _explain(client, leased["job"]["id"]), "scheduled")
    assert reason["blocking"] and "snoozed (1 time(s))" in reason["message"]


async def test_a_pushed_queue_names_its_host_and_an_open_breaker(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    # the breaker is open before the target exists: the dispatcher delivers nothing
    await db.execute(
        "INSERT INTO jobq.delivery_breakers (target, failures, trips, open_until)"
        " VALUES ('queue:hooks', 5, 1, now() + interval '1 hour')"
    )
    await db.execute(
        "INSERT INTO jobq.push_targets (queue, url, timeout_seconds, secrets)"
        " VALUES ('hooks', 'https://user:pw@hooks.example.com:8443/in?x=1', 5, '{s}')"
    )
    job = await enqueue(client, "hooks")
    body = await _explain(client, job["id"])
    pushed = _reason(body, "pushed")
    assert pushed["blocking"] is False
    assert pushed["message"] == "queue hooks is pushed to hooks.example.com:8443"  # no userinfo
    held = _reason(body, "push_breaker_open")
    assert held["blocking"] is True and held["until"] is not None
    assert not _codes(body) & {"no_worker", "no_worker_for_type"}  # no worker leases it
    await db.execute("UPDATE jobq.delivery_breakers SET open_until = now() - interval '1 s'")
    assert "push_breaker_open" not in _codes(await _explain(client, job["id"]))
    await db.execute("DELETE FROM jobq.push_targets")  # nothing for the dispatcher to try


async def test_a_finished_job_says_how_it_ended(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "done", max_attempts=1)
    leased = (await lease(client, "done"))[0]
    response = await client.post(
        f"/v1/leases/{leased['lease_id']}/fail",
        json={"error": {"type": "Boom", "message": "it broke"}},
    )
    assert response.status_code == 200, response.text
    body = await _explain(client, job["id"])
    (reason,) = body["reasons"]
    assert reason["code"] == "failed" and "it broke" in reason["message"]
    cancelled = await enqueue(client, "done")
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    assert _codes(await _explain(client, cancelled["id"])) == {"cancelled"}


async def test_an_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/jobs/987654321/explain"), 404, "job_not_found")


async def test_a_key_must_read_the_jobs_queue(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    admin = bearer(await create_key(database_url, "admin", ["admin"]))
    mail = bearer(await create_key(database_url, "mail-reader", ["read"], ["mail*"]))
    service = await service_factory()
    made = await service.remote.post("/v1/queues/sms/jobs", json={"type": "t"}, headers=admin)
    job_id = made.json()["id"]
    refused = await service.remote.get(f"/v1/jobs/{job_id}/explain", headers=mail)
    assert_problem(refused, 403, "forbidden")
    assert (await service.remote.get(f"/v1/jobs/{job_id}/explain", headers=admin)).is_success


# ---- the property: explain's "leasable" is the lease's own rule -------------------------


async def _random_queue(
    client: httpx.AsyncClient, db: asyncpg.Connection, rng: random.Random, queue: str
) -> list[int]:
    """A queue with random limits, running jobs, delayed jobs and waiting children."""
    settings: dict[str, Any] = {}
    if rng.random() < 0.5:
        settings["max_running"] = rng.randint(1, 4)
    if rng.random() < 0.5:
        settings["max_running_per_key"] = rng.randint(1, 2)
    if rng.random() < 0.3:
        settings["rate_limit"] = {"jobs": rng.randint(1, 4), "per_seconds": 60}
    if settings:
        await put_settings(client, queue, **settings)
    ids: list[int] = []
    for _ in range(rng.randint(1, 12)):
        job: dict[str, Any] = {"priority": rng.randint(0, 2)}
        if rng.random() < 0.5:
            job["concurrency_key"] = rng.choice(["a", "b"])
        if rng.random() < 0.2:
            job["delay_seconds"] = 600
        if ids and rng.random() < 0.2:
            job["depends_on"] = [rng.choice(ids)]
        ids.append((await enqueue(client, queue, **job))["id"])
    for _ in range(rng.randint(0, 3)):
        await lease(client, queue)
    if rng.random() < 0.2:
        assert (await client.post(f"/v1/queues/{queue}/pause")).status_code == 200
    return ids


async def test_a_job_explain_calls_leasable_is_taken_by_the_next_lease(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    rng = random.Random(51)
    checked = leasable = 0
    for round_ in range(25):
        queue = f"prop{round_}"
        ids = await _random_queue(client, db, rng, queue)
        job_id = rng.choice(ids)
        body = await _explain(client, job_id)
        checked += 1
        if not body["leasable"]:
            assert body["state"] != "queued" or _codes(body, blocking=True), body
            continue
        leasable += 1
        behind = [r["count"] for r in body["reasons"] if r["code"] == "behind"]
        taken = await lease(client, queue, max_jobs=1 + (behind[0] if behind else 0))
        assert job_id in [item["job"]["id"] for item in taken], body
    assert checked == 25 and leasable >= 5  # the draws exercise both answers
