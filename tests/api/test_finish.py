"""Heartbeat, complete, fail and batch acks: retries, backoff and lease fencing."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.core.config import DEFAULT_MAX_JSON_DEPTH
from app.jobs.schemas import AcksOut, AttemptOut
from tests.helpers import assert_problem, enqueue, lease, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

BOOM = {"error": {"type": "ValueError", "message": "boom", "details": {"line": 3}}}


async def test_complete_records_result_and_history(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    held = await lease_one(client, worker="w9")
    response = await client.post(
        f"/v1/leases/{held['lease_id']}/complete", json={"result": {"rows": 42}}
    )
    assert response.status_code == 200
    done = response.json()
    assert done["id"] == job["id"] and done["state"] == "succeeded"
    assert done["result"] == {"rows": 42} and done["finished_at"] is not None
    assert done["worker_id"] is None and done["lease_expires_at"] is None
    (attempt,) = done["attempts"]
    assert attempt["attempt"] == 1 and attempt["outcome"] == "succeeded"
    assert attempt["worker_id"] == "w9" and "lease_id" not in attempt


async def test_repeating_a_finishing_call_gives_the_same_outcome(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    first = await client.post(f"/v1/leases/{token}/complete", json={"result": 1})
    again = await client.post(f"/v1/leases/{token}/complete", json={"result": 1})
    assert again.status_code == 200 and again.json() == first.json()
    contradicting = await client.post(f"/v1/leases/{token}/fail", json=BOOM)
    body = assert_problem(contradicting, 409, "lease_lost")
    assert body["state"] == "succeeded" and body["job_id"] == first.json()["id"]


async def test_fail_then_complete_is_refused(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    first = await client.post(f"/v1/leases/{token}/fail", json=BOOM)
    assert first.status_code == 200 and first.json()["state"] == "queued"
    again = await client.post(f"/v1/leases/{token}/fail", json=BOOM)
    assert again.status_code == 200 and again.json() == first.json()
    history = (await client.get(f"/v1/jobs/{job['id']}")).json()["attempts"]
    assert [(a["attempt"], a["outcome"]) for a in history] == [(1, "failed")]
    assert_problem(await client.post(f"/v1/leases/{token}/complete"), 409, "lease_lost")
    assert_problem(await client.post(f"/v1/leases/{token}/heartbeat"), 409, "lease_lost")


@pytest.mark.parametrize(
    "token",
    [
        "1-00000000000000000000000000000000",
        "nonsense",
        "-1-abc",
        "99999999999999999999999-0",
        "1-" + "f" * 32,
    ],
)
async def test_never_issued_leases_are_not_found(client: httpx.AsyncClient, token: str) -> None:
    await enqueue(client)
    await lease_one(client)
    for action, body in (("complete", {}), ("fail", BOOM), ("heartbeat", {})):
        assert_problem(
            await client.post(f"/v1/leases/{token}/{action}", json=body), 404, "lease_not_found"
        )


async def test_retryable_failure_requeues_with_exponential_backoff(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(client, max_attempts=5)
    for attempt, base in ((1, 10), (2, 20), (3, 40)):
        held = await lease_one(client)
        assert held["job"]["attempt"] == attempt
        before = datetime.now(UTC)
        failed = (await client.post(f"/v1/leases/{held['lease_id']}/fail", json=BOOM)).json()
        after = datetime.now(UTC)
        assert failed["state"] == "queued" and failed["attempt"] == attempt
        assert failed["last_error"] == BOOM["error"]
        run_at = datetime.fromisoformat(failed["run_at"])
        assert before + timedelta(seconds=base * 0.9) <= run_at
        assert run_at <= after + timedelta(seconds=base * 1.1)
        assert await lease(client) == []  # not due yet
        await db.execute("UPDATE jobq.jobs SET run_at = now() WHERE id = $1", job["id"])
    history = (await client.get(f"/v1/jobs/{job['id']}")).json()["attempts"]
    assert [a["outcome"] for a in history] == ["failed"] * 3
    assert [a["attempt"] for a in history] == [1, 2, 3]


async def test_backoff_is_jittered(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    count = 20  # ±10 % drawn per failure: 20 equal delays by chance cannot happen
    for _ in range(count):
        await enqueue(client)
    for held in await lease(client, max_jobs=count):
        assert held["job"]["attempt"] == 1
        response = await client.post(f"/v1/leases/{held['lease_id']}/fail", json=BOOM)
        assert response.json()["state"] == "queued"
    # Each row's run_at is its failing statement's now() plus the delay, updated_at that now().
    delays = [
        row["delay"]
        for row in await db.fetch(
            "SELECT extract(epoch FROM run_at - updated_at)::float8 AS delay FROM jobq.jobs"
        )
    ]
    assert len(delays) == count
    assert all(9.0 <= delay <= 11.0 for delay in delays), delays
    assert len(set(delays)) > 1, delays


async def test_backoff_is_capped(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    job = await enqueue(client, max_attempts=30)
    await db.execute("UPDATE jobq.jobs SET attempt = 20 WHERE id = $1", job["id"])
    held = await lease_one(client)
    failed = (await client.post(f"/v1/leases/{held['lease_id']}/fail", json=BOOM)).json()
    delay = datetime.fromisoformat(failed["run_at"]) - datetime.now(UTC)
    assert timedelta(seconds=3600 * 0.9 - 5) < delay < timedelta(seconds=3600 * 1.1)


async def test_retry_after_overrides_backoff(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    held = await lease_one(client)
    failed = (
        await client.post(
            f"/v1/leases/{held['lease_id']}/fail", json={**BOOM, "retry_after_seconds": 0}
        )
    ).json()
    assert failed["state"] == "queued"
    again = await lease_one(client)
    assert again["job"]["attempt"] == 2


async def test_non_retryable_failure_is_final(client: httpx.AsyncClient) -> None:
    await enqueue(client, max_attempts=5)
    held = await lease_one(client)
    failed = (
        await client.post(f"/v1/leases/{held['lease_id']}/fail", json={**BOOM, "retryable": False})
    ).json()
    assert failed["state"] == "failed" and failed["finished_at"] is not None
    assert await lease(client) == []


async def test_last_attempt_failure_is_final(client: httpx.AsyncClient) -> None:
    await enqueue(client, max_attempts=2)
    for expected in ("queued", "failed"):
        held = await lease_one(client)
        failed = (
            await client.post(
                f"/v1/leases/{held['lease_id']}/fail", json={**BOOM, "retry_after_seconds": 0}
            )
        ).json()
        assert failed["state"] == expected
    assert failed["attempt"] == 2 and len(failed["attempts"]) == 2


async def test_long_error_messages_are_truncated(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    held = await lease_one(client)
    message = "é" * 10_000  # 20,000 bytes of UTF-8
    failed = (
        await client.post(
            f"/v1/leases/{held['lease_id']}/fail", json={"error": {"type": "E", "message": message}}
        )
    ).json()
    stored = failed["last_error"]["message"]
    assert len(stored.encode()) <= 8192 and stored == "é" * 4096


async def test_heartbeat_extends_from_now_and_records_progress(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, lease_seconds=30)
    token = (await lease_one(client))["lease_id"]
    before = datetime.now(UTC)
    beat = await client.post(
        f"/v1/leases/{token}/heartbeat",
        json={
            "extend_seconds": 300,
            "progress": {"percent": 40, "stage": "resize", "message": "2/5"},
        },
    )
    assert beat.status_code == 200
    body = beat.json()
    assert body["lease_id"] == token and body["cancel_requested"] is False
    expires = datetime.fromisoformat(body["expires_at"])
    assert before + timedelta(seconds=295) < expires < before + timedelta(seconds=305)
    progress = (await client.get(f"/v1/jobs/{job['id']}")).json()["progress"]
    assert (progress["percent"], progress["stage"], progress["message"]) == (40, "resize", "2/5")
    plain = (await client.post(f"/v1/leases/{token}/heartbeat")).json()
    # Same length, from later; but within 0.1 s of the last write the row is left as it
    # is (tests/api/test_limits.py covers the heartbeat's write interval).
    assert datetime.fromisoformat(plain["expires_at"]) >= expires
    assert plain["progress_recorded"] is False
    kept = (await client.get(f"/v1/jobs/{job['id']}")).json()["progress"]
    assert kept["percent"] == 40  # a heartbeat without progress leaves it alone


async def test_acks_report_per_item_status_in_order(client: httpx.AsyncClient) -> None:
    for _ in range(4):
        await enqueue(client)
    held = [item["lease_id"] for item in await lease(client, max_jobs=4)]
    await client.post(f"/v1/leases/{held[3]}/complete")
    acks = [
        {"lease_id": held[0], "outcome": "complete", "result": {"n": 0}},
        {"lease_id": held[1], "outcome": "fail", **BOOM},
        {"lease_id": "12345-" + "0" * 32, "outcome": "complete"},
        {"lease_id": held[2], "outcome": "fail", **BOOM, "retryable": False},
        {"lease_id": held[3], "outcome": "fail", **BOOM},
        {"lease_id": held[3], "outcome": "complete"},
        {"lease_id": held[0], "outcome": "complete"},
        {"lease_id": held[0], "outcome": "fail", **BOOM},
    ]
    response = await client.post("/v1/acks", json={"acks": acks})
    assert response.status_code == 200
    # Serialized without validating it again: validating and serializing changes nothing.
    assert response.headers["content-type"] == "application/json"
    assert (
        response.content == AcksOut.model_validate_json(response.content).model_dump_json().encode()
    )
    results = response.json()["results"]
    assert [r["lease_id"] for r in results] == [a["lease_id"] for a in acks]
    assert [(r["status"], r["code"], r["state"]) for r in results] == [
        (200, None, "succeeded"),
        (200, None, "queued"),
        (404, "lease_not_found", None),
        (200, None, "failed"),
        (409, "lease_lost", "succeeded"),
        (200, None, "succeeded"),
        (200, None, "succeeded"),  # the same lease twice in one batch: a repeat
        (409, "lease_lost", "succeeded"),
    ]
    first = (await client.get(f"/v1/jobs/{results[0]['job_id']}")).json()
    assert first["result"] == {"n": 0} and len(first["attempts"]) == 1


@pytest.mark.parametrize(
    ("with_result", "stale"), [(False, False), (False, True), (True, False), (True, True)]
)
async def test_a_batch_of_completes_answers_each_ack_in_its_place(
    client: httpx.AsyncClient, with_result: bool, stale: bool
) -> None:
    # Completes without results, of distinct leases, take the service's shortest way,
    # which must answer as the general one does (a result on one ack takes that one).
    for _ in range(5):
        await enqueue(client)
    leased = await lease(client, max_jobs=5)
    held = [item["lease_id"] for item in leased]
    job_ids = [item["job"]["id"] for item in leased]
    if stale:
        await client.post(f"/v1/leases/{held[1]}/fail", json=BOOM)  # to be retried: lost
    acks: list[dict[str, Any]] = [{"lease_id": token, "outcome": "complete"} for token in held]
    if with_result:
        acks[0]["result"] = {"n": 1}
    acks.reverse()  # answered in the batch's order, whatever the database's
    results = (await client.post("/v1/acks", json={"acks": acks})).json()["results"]
    assert [(r["lease_id"], r["job_id"]) for r in results] == list(
        zip(reversed(held), reversed(job_ids), strict=True)
    )
    expected: list[tuple[int, str | None, str]] = [(200, None, "succeeded")] * 5
    if stale:
        expected[3] = (409, "lease_lost", "queued")
    assert [(r["status"], r["code"], r["state"]) for r in results] == expected


async def test_an_ack_too_large_or_too_deep_is_refused_alone(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    jobs = [await enqueue(client) for _ in range(3)]
    held = {item["job"]["id"]: item["lease_id"] for item in await lease(client, max_jobs=3)}
    tokens = [held[job["id"]] for job in jobs]
    deep: Any = "leaf"
    for _ in range(DEFAULT_MAX_JSON_DEPTH + 1):
        deep = [deep]
    acks = [
        {"lease_id": tokens[0], "outcome": "complete", "result": {"ok": True}},
        {"lease_id": tokens[1], "outcome": "complete", "result": "x" * (256 * 1024)},
        {"lease_id": tokens[2], "outcome": "fail", "error": {"type": "E", "details": deep}},
    ]
    response = await client.post("/v1/acks", json={"acks": acks})
    assert response.status_code == 200, response.text
    refused = {"job_id": None, "state": None}
    assert response.json()["results"] == [
        {"lease_id": tokens[0], "status": 200, "code": None, "job_id": jobs[0]["id"],
         "state": "succeeded"},
        {"lease_id": tokens[1], "status": 413, "code": "payload_too_large", **refused},
        {"lease_id": tokens[2], "status": 422, "code": "validation_error", **refused},
    ]  # fmt: skip
    rows = await db.fetch("SELECT state::text, result, attempts FROM jobq.jobs ORDER BY id")
    assert [row["state"] for row in rows] == ["succeeded", "running", "running"]
    assert [row["result"] for row in rows] == ['{"ok": true}', None, None]
    assert [row["attempts"] for row in rows[1:]] == ["[]", "[]"]  # nothing was recorded
    # The refused leases still hold their jobs, and a good ack finishes them.
    fixed = [{"lease_id": token, "outcome": "complete"} for token in tokens[1:]]
    results = (await client.post("/v1/acks", json={"acks": fixed})).json()["results"]
    assert [(r["status"], r["state"]) for r in results] == [(200, "succeeded")] * 2


async def test_acks_batch_limit_is_a_setting(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    client: httpx.AsyncClient = await client_factory(app_factory(max_ack_batch=2))
    acks = [{"lease_id": f"{n}-" + "0" * 32, "outcome": "complete"} for n in range(1, 4)]
    body = assert_problem(
        await client.post("/v1/acks", json={"acks": acks}), 422, "validation_error"
    )
    assert body["errors"][0]["loc"] == ["body", "acks"]


async def test_a_complete_writes_no_history_and_sql_shows_what_the_api_shows(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    # A job failed once then succeeded, and one that failed for good: the API's history
    # and jobq.attempts_of agree, and only the failures are stored in `attempts`.
    twice = await enqueue(client, max_attempts=2)
    first = await lease_one(client, worker="w1")
    await client.post(
        f"/v1/leases/{first['lease_id']}/fail", json={**BOOM, "retry_after_seconds": 0}
    )
    second = await lease_one(client, worker="w2")
    await client.post(f"/v1/leases/{second['lease_id']}/complete", json={"result": 1})
    dead = await enqueue(client, max_attempts=1)
    held = await lease_one(client, worker="w3")
    await client.post(f"/v1/leases/{held['lease_id']}/fail", json=BOOM)

    shown = {j: (await client.get(f"/v1/jobs/{j}")).json() for j in (twice["id"], dead["id"])}
    assert [(a["worker_id"], a["outcome"]) for a in shown[twice["id"]]["attempts"]] == [
        ("w1", "failed"),
        ("w2", "succeeded"),
    ]
    assert shown[twice["id"]]["worker_id"] is None, "no worker holds a finished job"
    rows = await db.fetch(
        "SELECT id, attempts, jobq.attempts_of(j) AS full FROM jobq.jobs j ORDER BY id"
    )
    stored = {row["id"]: json.loads(row["attempts"]) for row in rows}
    assert [a["outcome"] for a in stored[twice["id"]]] == ["failed"]
    assert [a["outcome"] for a in stored[dead["id"]]] == ["failed"]
    for row in rows:  # the API leaves out the lease token and the key
        in_sql = [{k: a[k] for k in AttemptOut.model_fields} for a in json.loads(row["full"])]
        assert _parsed(in_sql) == _parsed(shown[row["id"]]["attempts"])


def _parsed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attempt records with their times as datetimes (SQL and JSON write them apart)."""
    times = ("started_at", "finished_at")
    return [
        {k: datetime.fromisoformat(v) if k in times else v for k, v in a.items()} for a in records
    ]
