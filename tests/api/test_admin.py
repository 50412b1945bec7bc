"""Admin actions on jobs: cancel, retry, redrive, purge and delete, and their state rules."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.maintenance import Reaper
from app.queues.service.admin import QueueAdmin
from tests.helpers import assert_problem, enqueue, lease, lease_one

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


async def _job(client: httpx.AsyncClient, job_id: int) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _fail(
    client: httpx.AsyncClient, token: str, error_type: str = "E", *, retryable: bool = False
) -> dict[str, Any]:
    response = await client.post(
        f"/v1/leases/{token}/fail", json={"error": {"type": error_type}, "retryable": retryable}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _failed_job(
    client: httpx.AsyncClient, queue: str = "default", error_type: str = "E", **job: Any
) -> dict[str, Any]:
    """A job that failed for good after one attempt."""
    created = await enqueue(client, queue, **job)
    held = await lease_one(client, queue)
    assert held["job"]["id"] == created["id"]
    return await _fail(client, held["lease_id"], error_type)


def test_the_admin_operations_are_in_the_spec() -> None:
    spec = json.loads(SPEC.read_text())
    ops = {
        op["operationId"]: op["tags"]
        for item in spec["paths"].values()
        for op in item.values()
        if op["operationId"]
        in {
            "cancelJob",
            "retryJob",
            "deleteJob",
            "redriveFailedJobs",
            "pauseQueue",
            "resumeQueue",
            "purgeQueue",
        }
    }
    assert len(ops) == 7 and all(tags == ["admin"] for tags in ops.values())


# ---- cancel ---------------------------------------------------------------------------


async def test_cancel_a_queued_job_at_once(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, idempotency_key="k1")
    response = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 200, response.text
    cancelled = response.json()
    assert cancelled["state"] == "cancelled" and cancelled["cancel_requested"] is True
    assert cancelled["finished_at"] is not None and cancelled["attempt"] == 0
    assert await lease(client) == []
    # Cancelling again is a repeat of what happened: 200, nothing changes.
    again = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 200 and again.json() == cancelled
    # Its idempotency key holds until retention deletes the job, as for a failed job.
    dup = await client.post(
        "/v1/queues/default/jobs", json={"type": "task"}, headers={"Idempotency-Key": "k1"}
    )
    assert dup.status_code == 200 and dup.json()["id"] == job["id"]
    assert dup.json()["state"] == "cancelled"


async def test_cancel_a_running_job_is_seen_on_its_heartbeat_and_honoured_by_failing(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, max_attempts=5)
    held = await lease_one(client)
    token = held["lease_id"]
    beat = await client.post(f"/v1/leases/{token}/heartbeat", json={})
    assert beat.json()["cancel_requested"] is False

    response = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 200, response.text
    flagged = response.json()
    assert flagged["state"] == "running" and flagged["cancel_requested"] is True
    assert flagged["finished_at"] is None and flagged["worker_id"] == "w1"
    # Asking again is fine: still running, still flagged.
    again = (await client.post(f"/v1/jobs/{job['id']}/cancel")).json()
    assert again["state"] == "running" and again["cancel_requested"] is True

    beat = await client.post(f"/v1/leases/{token}/heartbeat", json={})
    assert beat.status_code == 200 and beat.json()["cancel_requested"] is True

    stopped = await _fail(client, token, "Cancelled", retryable=False)
    assert stopped["state"] == "cancelled" and stopped["finished_at"] is not None
    assert stopped["last_error"]["type"] == "Cancelled"
    assert [a["outcome"] for a in stopped["attempts"]] == ["failed"]
    assert stopped["lease_expires_at"] is None and stopped["worker_id"] is None
    # The worker repeating its fail gets the same answer.
    repeat = await client.post(
        f"/v1/leases/{token}/fail", json={"error": {"type": "Cancelled"}, "retryable": False}
    )
    assert repeat.status_code == 200 and repeat.json()["state"] == "cancelled"
    assert await lease(client) == []


async def test_a_cancelled_running_job_is_not_retried_even_on_a_retryable_failure(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, max_attempts=5)
    held = await lease_one(client)
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    stopped = await _fail(client, held["lease_id"], retryable=True)
    assert stopped["state"] == "cancelled" and stopped["attempt"] == 1


async def test_a_cancelled_running_job_may_still_complete(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    held = await lease_one(client)
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    done = await client.post(f"/v1/leases/{held['lease_id']}/complete", json={"result": 1})
    assert done.status_code == 200
    assert done.json()["state"] == "succeeded" and done.json()["result"] == 1


async def test_a_cancelled_running_job_whose_lease_expires_is_cancelled_by_the_reaper(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, max_attempts=5)
    other = await enqueue(client, max_attempts=5)
    await lease(client, max_jobs=2, worker="gone")
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second'")
    result = await reaper.run_once()
    assert (result.requeued, result.failed, result.cancelled, result.reaped) == (1, 0, 1, 2)
    reaped = await _job(client, job["id"])
    assert reaped["state"] == "cancelled" and reaped["finished_at"] is not None
    assert reaped["last_error"]["type"] == "lease_expired"
    assert [a["outcome"] for a in reaped["attempts"]] == ["lease_expired"]
    assert (await _job(client, other["id"]))["state"] == "queued"


async def test_cancel_a_finished_job_is_refused(client: httpx.AsyncClient) -> None:
    done = await enqueue(client)
    held = await lease_one(client)
    await client.post(f"/v1/leases/{held['lease_id']}/complete", json={})
    problem = assert_problem(
        await client.post(f"/v1/jobs/{done['id']}/cancel"), 409, "job_finished"
    )
    assert problem["job_id"] == done["id"] and problem["state"] == "succeeded"
    failed = await _failed_job(client)
    problem = assert_problem(
        await client.post(f"/v1/jobs/{failed['id']}/cancel"), 409, "job_finished"
    )
    assert problem["state"] == "failed"
    assert (await _job(client, failed["id"]))["cancel_requested"] is False


async def test_cancel_an_unknown_job(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.post("/v1/jobs/404/cancel"), 404, "job_not_found")
    assert problem["job_id"] == 404
    assert_problem(await client.post("/v1/jobs/0/cancel"), 422, "validation_error")


async def _queued_behind_a_lock(
    db: asyncpg.Connection, job_id: int, first: Awaitable[Any], second: Awaitable[Any]
) -> tuple[Any, Any]:
    """Run two requests that both wait for the job's row lock, `first` ahead in the queue."""
    async with db.transaction():
        await db.execute("SELECT FROM jobq.jobs WHERE id = $1 FOR UPDATE", job_id)
        ahead = asyncio.ensure_future(first)
        await asyncio.sleep(0.2)
        behind = asyncio.ensure_future(second)
        await asyncio.sleep(0.2)
        assert not ahead.done() and not behind.done()  # both are blocked on the row
    return await ahead, await behind


def _check_cancel_and_complete(
    cancel: httpx.Response, complete: httpx.Response, final: dict[str, Any]
) -> bool:
    """The race left one consistent story; True when the cancel got in first."""
    assert complete.status_code == 200 and complete.json()["state"] == "succeeded"
    assert final["state"] == "succeeded" and final["result"] == "r"
    assert len(final["attempts"]) == 1 and final["finished_at"] is not None
    if cancel.status_code == 200:  # flagged while running, then completed anyway
        assert cancel.json()["state"] == "running"
        assert final["cancel_requested"] is True
        return True
    assert_problem(cancel, 409, "job_finished")  # completed first: nothing to cancel
    assert final["cancel_requested"] is False
    return False


@pytest.mark.parametrize("cancel_first", [True, False])
async def test_cancel_racing_complete_on_the_row_lock(
    client: httpx.AsyncClient, db: asyncpg.Connection, cancel_first: bool
) -> None:
    job = await enqueue(client)
    held = await lease_one(client)
    cancel_call = client.post(f"/v1/jobs/{job['id']}/cancel")
    complete_call = client.post(f"/v1/leases/{held['lease_id']}/complete", json={"result": "r"})
    if cancel_first:
        cancel, complete = await _queued_behind_a_lock(db, job["id"], cancel_call, complete_call)
    else:
        complete, cancel = await _queued_behind_a_lock(db, job["id"], complete_call, cancel_call)
    final = await _job(client, job["id"])
    assert _check_cancel_and_complete(cancel, complete, final) is cancel_first


async def test_cancel_racing_complete_leaves_a_consistent_job(client: httpx.AsyncClient) -> None:
    for i in range(16):
        job = await enqueue(client)
        held = await lease_one(client)
        calls = [
            client.post(f"/v1/jobs/{job['id']}/cancel"),
            client.post(f"/v1/leases/{held['lease_id']}/complete", json={"result": "r"}),
        ]
        if i % 2:
            calls.reverse()
        answers = await asyncio.gather(*calls)
        cancel, complete = answers if i % 2 == 0 else answers[::-1]
        _check_cancel_and_complete(cancel, complete, await _job(client, job["id"]))


async def test_cancel_racing_a_retryable_failure_always_ends_cancelled(
    client: httpx.AsyncClient,
) -> None:
    for _ in range(15):
        job = await enqueue(client, max_attempts=5)
        held = await lease_one(client)
        cancel, fail = await asyncio.gather(
            client.post(f"/v1/jobs/{job['id']}/cancel"),
            client.post(f"/v1/leases/{held['lease_id']}/fail", json={"error": {"type": "E"}}),
        )
        assert cancel.status_code == 200 and fail.status_code == 200
        # Either the failure requeued it and the cancel then cancelled the queued job, or
        # the cancel flagged it and the failure then stopped it.
        final = await _job(client, job["id"])
        assert final["state"] == "cancelled" and final["finished_at"] is not None
        assert [a["outcome"] for a in final["attempts"]] == ["failed"]
    assert await lease(client) == []


async def test_cancel_racing_a_lease_either_cancels_or_flags(client: httpx.AsyncClient) -> None:
    for _ in range(15):
        job = await enqueue(client)
        cancel, leased = await asyncio.gather(
            client.post(f"/v1/jobs/{job['id']}/cancel"), lease(client)
        )
        final = await _job(client, job["id"])
        assert cancel.status_code == 200 and final["cancel_requested"] is True
        if leased:
            assert final["state"] == "running"
            await client.post(f"/v1/leases/{leased[0]['lease_id']}/complete", json={})
        else:
            assert final["state"] == "cancelled"


# ---- retry ----------------------------------------------------------------------------


async def test_retry_a_failed_job_keeps_its_history(client: httpx.AsyncClient) -> None:
    failed = await _failed_job(client, max_attempts=1)
    assert failed["state"] == "failed" and failed["attempt"] == 1
    response = await client.post(f"/v1/jobs/{failed['id']}/retry")
    assert response.status_code == 200, response.text
    retried = response.json()
    assert retried["state"] == "queued" and retried["finished_at"] is None
    assert retried["attempt"] == 1 and retried["max_attempts"] == 2  # one more try
    assert retried["attempts"] == failed["attempts"] and retried["last_error"]["type"] == "E"
    assert retried["worker_id"] is None and retried["lease_expires_at"] is None
    held = await lease_one(client)
    assert held["job"]["id"] == failed["id"] and held["job"]["attempt"] == 2
    again = await _fail(client, held["lease_id"], "E2", retryable=True)
    assert again["state"] == "failed"  # no try left: 2 of 2
    assert [a["error"]["type"] for a in again["attempts"]] == ["E", "E2"]


async def test_retry_with_reset_attempts_and_run_at(client: httpx.AsyncClient) -> None:
    failed = await _failed_job(client, max_attempts=3)
    later = datetime.now(UTC) + timedelta(hours=1)
    response = await client.post(
        f"/v1/jobs/{failed['id']}/retry",
        json={"reset_attempts": True, "run_at": later.isoformat()},
    )
    retried = response.json()
    assert retried["state"] == "queued" and retried["attempt"] == 0
    assert retried["max_attempts"] == 3 and len(retried["attempts"]) == 1
    assert datetime.fromisoformat(retried["run_at"]) == later
    assert await lease(client) == []  # not due yet
    assert_problem(
        await client.post(f"/v1/jobs/{failed['id']}/retry", json={"run_at": "2030-01-01T00:00"}),
        422,
        "validation_error",
    )


async def test_retry_a_cancelled_job_clears_the_cancellation(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    held = await lease_one(client)
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    await _fail(client, held["lease_id"])
    retried = (await client.post(f"/v1/jobs/{job['id']}/retry", json={})).json()
    assert retried["state"] == "queued" and retried["cancel_requested"] is False
    held = await lease_one(client)
    beat = await client.post(f"/v1/leases/{held['lease_id']}/heartbeat")
    assert beat.json()["cancel_requested"] is False


async def test_retry_refuses_jobs_that_are_not_failed_or_cancelled(
    client: httpx.AsyncClient,
) -> None:
    queued = await enqueue(client)
    problem = assert_problem(
        await client.post(f"/v1/jobs/{queued['id']}/retry"), 409, "job_not_retryable"
    )
    assert problem["state"] == "queued" and problem["job_id"] == queued["id"]
    held = await lease_one(client)
    assert_problem(await client.post(f"/v1/jobs/{queued['id']}/retry"), 409, "job_not_retryable")
    await client.post(f"/v1/leases/{held['lease_id']}/complete")
    problem = assert_problem(
        await client.post(f"/v1/jobs/{queued['id']}/retry"), 409, "job_not_retryable"
    )
    assert problem["state"] == "succeeded"
    assert_problem(await client.post("/v1/jobs/999/retry"), 404, "job_not_found")


# ---- redrive --------------------------------------------------------------------------


async def _redrive(client: httpx.AsyncClient, queue: str = "default", **body: Any) -> int:
    response = await client.post(f"/v1/queues/{queue}/failed/retry", json=body)
    assert response.status_code == 200, response.text
    retried: int = response.json()["retried"]
    return retried


async def _states(db: asyncpg.Connection) -> dict[int, str]:
    rows = await db.fetch("SELECT id, state::text FROM jobq.jobs ORDER BY id")
    return {row["id"]: row["state"] for row in rows}


async def test_redrive_filters(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    a = await _failed_job(client, type="mail", error_type="SMTPTimeout")
    b = await _failed_job(client, type="mail", error_type="Bounce")
    c = await _failed_job(client, type="sms", error_type="SMTPTimeout")
    d = await _failed_job(client, type="mail", error_type="SMTPTimeout")
    other_queue = await _failed_job(client, "other", type="mail", error_type="SMTPTimeout")
    succeeded = await enqueue(client, type="mail")
    held = await lease_one(client)
    await client.post(f"/v1/leases/{held['lease_id']}/complete")
    cancelled = await enqueue(client, type="mail")
    await client.post(f"/v1/jobs/{cancelled['id']}/cancel")
    # a and b failed a day ago.
    await db.execute(
        "UPDATE jobq.jobs SET finished_at = now() - interval '1 day' WHERE id = ANY($1)",
        [a["id"], b["id"]],
    )
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()

    assert await _redrive(client, type="mail", error_type="SMTPTimeout", failed_since=since) == 1
    assert (await _states(db))[d["id"]] == "queued"
    assert await _redrive(client, type="mail", error_type="SMTPTimeout") == 1  # a
    assert await _redrive(client, error_type="Bounce") == 1  # b
    assert await _redrive(client, type="sms") == 1  # c
    assert await _redrive(client) == 0
    states = await _states(db)
    assert {states[j["id"]] for j in (a, b, c, d)} == {"queued"}
    assert states[other_queue["id"]] == "failed"
    assert states[succeeded["id"]] == "succeeded" and states[cancelled["id"]] == "cancelled"


async def test_redrive_limit_takes_the_oldest_failures_and_wakes_workers(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    jobs = [await _failed_job(client) for _ in range(5)]
    await db.execute("UPDATE jobq.jobs SET finished_at = now() - make_interval(secs => 100 - id)")
    response = await client.post(
        "/v1/queues/default/failed/retry", json={"limit": 2, "reset_attempts": True}
    )
    assert response.json() == {"retried": 2}
    states = await _states(db)
    assert [states[j["id"]] for j in jobs] == ["queued", "queued", "failed", "failed", "failed"]
    leased = await lease(client, max_jobs=5)
    assert sorted(item["job"]["id"] for item in leased) == [jobs[0]["id"], jobs[1]["id"]]
    assert {item["job"]["attempt"] for item in leased} == {1}  # reset, then leased once
    # No body: everything left, up to the default limit.
    assert (await client.post("/v1/queues/default/failed/retry")).json() == {"retried": 3}
    for bad in ({"limit": 0}, {"limit": 10_001}, {"unknown": 1}, {"failed_since": "2026-01-01"}):
        assert_problem(
            await client.post("/v1/queues/default/failed/retry", json=bad),
            422,
            "validation_error",
        )


# ---- purge and delete -----------------------------------------------------------------


async def test_purge_needs_the_queue_name(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue(client, "mail")
    problem = assert_problem(
        await client.post("/v1/queues/mail/purge", json={"confirm": "other"}),
        422,
        "confirmation_mismatch",
    )
    assert problem["errors"][0]["loc"] == ["body", "confirm"]
    assert_problem(await client.post("/v1/queues/mail/purge", json={}), 422, "validation_error")
    assert_problem(await client.post("/v1/queues/mail/purge"), 415, "unsupported_media_type")
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1


async def test_purge_deletes_only_the_queued_jobs_of_the_queue(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    running = await enqueue(client, "mail")
    await lease_one(client, "mail")
    failed = await _failed_job(client, "mail")
    for _ in range(3):
        await enqueue(client, "mail", delay_seconds=3600)  # queued, not yet due
    await enqueue(client, "mail")
    other = await enqueue(client, "other")
    response = await client.post("/v1/queues/mail/purge", json={"confirm": "mail"})
    assert response.status_code == 200 and response.json() == {"deleted": 4}
    assert await _states(db) == {
        running["id"]: "running",
        failed["id"]: "failed",
        other["id"]: "queued",
    }
    again = await client.post("/v1/queues/mail/purge", json={"confirm": "mail"})
    assert again.json() == {"deleted": 0}


async def test_purge_works_in_batches(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    admin: QueueAdmin = app.state.services.queues.admin
    admin.purge_batch_size = 3
    batch = await client.post("/v1/queues/mail/jobs/batch", json={"jobs": [{"type": "t"}] * 10})
    assert batch.status_code == 201
    response = await client.post("/v1/queues/mail/purge", json={"confirm": "mail"})
    assert response.json() == {"deleted": 10}
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 0


async def test_delete_a_job_unless_it_runs(client: httpx.AsyncClient) -> None:
    first = await enqueue(client)
    second = await enqueue(client)
    held = await lease_one(client)
    assert held["job"]["id"] == first["id"]
    problem = assert_problem(await client.delete(f"/v1/jobs/{first['id']}"), 409, "job_running")
    assert problem["state"] == "running"
    assert (await _job(client, first["id"]))["state"] == "running"
    await client.post(f"/v1/leases/{held['lease_id']}/complete")
    for job_id in (first["id"], second["id"]):  # succeeded, then queued
        response = await client.delete(f"/v1/jobs/{job_id}")
        assert response.status_code == 204 and response.content == b""
        assert_problem(await client.get(f"/v1/jobs/{job_id}"), 404, "job_not_found")
    assert_problem(await client.delete(f"/v1/jobs/{first['id']}"), 404, "job_not_found")
    failed = await _failed_job(client)
    assert (await client.delete(f"/v1/jobs/{failed['id']}")).status_code == 204


@pytest.mark.parametrize("method", ["cancel", "retry"])
async def test_actions_on_a_deleted_job_are_not_found(
    client: httpx.AsyncClient, method: str
) -> None:
    job = await enqueue(client)
    assert (await client.delete(f"/v1/jobs/{job['id']}")).status_code == 204
    assert_problem(await client.post(f"/v1/jobs/{job['id']}/{method}"), 404, "job_not_found")
