"""Schedules against hostile callers, through HTTP with real keys: a tick's job cannot be
taken over, hostile values are refused with the reason (never a 500), cron is the
standard kind only, and the list is paged, filtered in SQL and capped."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

import asyncpg
import httpx
import pytest

from app.schedules import Scheduler
from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key

pytestmark = pytest.mark.usefixtures("no_keys")

HOURLY = {"queue": "reports", "type": "nightly", "payload": {"n": 1}, "cron": "@hourly"}


async def _keys(database_url: str) -> dict[str, dict[str, str]]:
    return {
        "admin": bearer(await create_key(database_url, "admin", ["admin"])),
        "producer": bearer(await create_key(database_url, "producer", ["enqueue"], ["reports"])),
        "reader": bearer(await create_key(database_url, "reader", ["read"], ["reports"])),
    }


async def test_a_client_cannot_take_a_ticks_job(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    db: asyncpg.Connection,
) -> None:
    keys = await _keys(database_url)
    service = await service_factory()
    http = service.remote
    made = await http.put("/v1/schedules/hourly", json=HOURLY, headers=keys["admin"])
    assert made.status_code == 201, made.text
    tick = made.json()["next_runs"][0]
    key = f"schedule:hourly:{tick.replace('Z', '+00:00')}"
    hijack = {"type": "nightly", "payload": {"evil": True}, "run_at": "9999-01-01T00:00:00Z"}
    # every way a client names an idempotency key refuses the scheduler's prefix
    for answer in (
        await http.post(
            "/v1/queues/reports/jobs",
            json={**hijack, "idempotency_key": key},
            headers=keys["producer"],
        ),
        await http.post(
            "/v1/queues/reports/jobs",
            json=hijack,
            headers={**keys["producer"], "Idempotency-Key": key},
        ),
        await http.post(
            "/v1/queues/reports/jobs/batch",
            json={"jobs": [{**hijack, "idempotency_key": key}]},
            headers=keys["producer"],
        ),
    ):
        problem = assert_problem(answer, 422, "validation_error")
        assert problem["errors"][0]["type"] == "reserved_key", problem
        assert "reserved for the scheduler" in problem["errors"][0]["msg"]
    # A job holding the key anyway (put there by a database role) is not adopted.
    due = await db.fetchval(
        "UPDATE jobq.schedules SET next_tick = date_trunc('hour', now())"
        " WHERE name = 'hourly' RETURNING next_tick"
    )
    foreign = await db.fetchval(
        "SELECT id FROM jobq.enqueue(queue => 'reports', type => 'nightly',"
        " payload => '{\"evil\": true}', run_at => '9999-01-01', idempotency_key => $1)",
        f"schedule:hourly:{due.astimezone(UTC).isoformat()}",
    )
    scheduler: Scheduler = service.app.state.services.scheduler
    assert (await scheduler.run_once()).enqueued == 1
    schedule = (await http.get("/v1/schedules/hourly", headers=keys["reader"])).json()
    (run,) = schedule["recent_runs"]
    assert run["job_id"] != foreign and run["job_state"] == "queued"
    job = (await http.get(f"/v1/jobs/{run['job_id']}", headers=keys["reader"])).json()
    assert job["payload"] == {"n": 1}  # the admin's job, not the hijacker's


NOT_STORABLE: list[tuple[str, Any]] = [
    ("NUL", "a\x00b"),
    ("lone surrogate", "\ud800"),
    ("NaN", math.nan),
    ("Infinity", math.inf),
    ("-Infinity", -math.inf),
]


def _raw(body: dict[str, Any]) -> bytes:
    """JSON as a hostile client sends it: NaN, Infinity, lone surrogates and all."""
    return json.dumps(body, allow_nan=True).encode()


@pytest.mark.parametrize("field", ["payload", "metadata"])
@pytest.mark.parametrize(("what", "value"), NOT_STORABLE, ids=[n for n, _ in NOT_STORABLE])
async def test_unstorable_json_in_a_schedule_is_422(
    client: httpx.AsyncClient, field: str, what: str, value: Any
) -> None:
    del what
    body = {**HOURLY, field: {"x": value}}
    answer = await client.put(
        "/v1/schedules/s", content=_raw(body), headers={"Content-Type": "application/json"}
    )
    problem = assert_problem(answer, 422, "validation_error")
    assert problem["errors"][0]["loc"] == ["body", field], problem


async def test_a_number_out_of_range_in_a_schedule_is_422(client: httpx.AsyncClient) -> None:
    for field in ("payload", "metadata"):
        raw = b'{"queue": "reports", "type": "t", "cron": "@hourly", "%s": {"x": 1e400}}' % (
            field.encode()
        )
        answer = await client.put(
            "/v1/schedules/s", content=raw, headers={"Content-Type": "application/json"}
        )
        assert_problem(answer, 422, "validation_error")


async def test_a_schedules_payload_is_capped_as_a_jobs_is(
    app_factory: Callable[..., Any], client_factory: Callable[[Any], Any]
) -> None:
    client = await client_factory(app_factory(max_payload_bytes=1000))
    for field in ("payload", "metadata"):
        answer = await client.put("/v1/schedules/big", json={**HOURLY, field: {"x": "y" * 1000}})
        assert_problem(answer, 413, "payload_too_large")
    assert (await client.put("/v1/schedules/big", json=HOURLY)).status_code == 201


@pytest.mark.parametrize(
    ("cron", "reason"),
    [
        ("0 25 * * *", "hour 25 is out of range 0-23"),
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("*/0 * * * *", "minute step 0 is out of range 1-59"),
        ("0 0 31 2 *", "never matches"),
        ("0 0 30,31 2 *", "never matches"),
        ("R * * * *", "minute 'R' is not a number 0-59"),
        ("0 0 L * *", "day-of-month 'L' is not a number 1-31"),
        ("0 0 1W * *", "day-of-month '1W'"),
        ("0 0 * * 1#2", "day-of-week '1#2' is not a value"),
        ("0 0 ? * *", "day-of-month '?' is not a value"),
        ("5-1 * * * *", "minute range 5-1 runs backwards"),
        ("* * * *", "must be 5 fields"),
        ("0 0 0 * * * *", "must be 5 fields (minute hour day-of-month month day-of-week), 6"),
        ("60 0 0 * * *", "second 60 is out of range 0-59"),
        ("@every 0s", "at least 1 s (the floor)"),
        ("@every 500ms", "at least 1 s (the floor)"),
    ],
)
async def test_cron_says_what_is_wrong(client: httpx.AsyncClient, cron: str, reason: str) -> None:
    answer = await client.put("/v1/schedules/s", json={**HOURLY, "cron": cron})
    problem = assert_problem(answer, 422, "validation_error")
    assert problem["errors"][0]["loc"] == ["body", "cron"], problem
    assert reason in problem["errors"][0]["msg"], problem


async def test_standard_cron_and_place_zones_are_accepted(client: httpx.AsyncClient) -> None:
    for cron in ("0 7 * * mon-fri", "*/15 9-17 * jan-mar 1,3,5", "0 0 29 2 *", "0 0 31 2 mon"):
        answer = await client.put("/v1/schedules/s", json={**HOURLY, "cron": cron})
        assert answer.status_code in (200, 201), (cron, answer.text)
    for zone in ("Factory", "localtime", "Moon/Base"):
        answer = await client.put("/v1/schedules/s", json={**HOURLY, "timezone": zone})
        problem = assert_problem(answer, 422, "validation_error")
        assert problem["errors"][0]["loc"] == ["body", "timezone"], problem


async def test_the_schedules_list_is_paged_and_filtered_before_reading(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    keys = await _keys(database_url)
    service = await service_factory()
    http = service.remote
    for n in range(7):
        queue = "reports" if n % 3 == 0 else "other"
        body = {**HOURLY, "queue": queue}
        made = await http.put(f"/v1/schedules/s{n}", json=body, headers=keys["admin"])
        assert made.status_code == 201
    seen: list[str] = []
    after = ""
    while True:
        page = await http.get(
            "/v1/schedules", params={"limit": 2, "after": after}, headers=keys["admin"]
        )
        body = page.json()
        seen += [s["name"] for s in body["schedules"]]
        if body["next_after"] is None:
            break
        after = body["next_after"]
    assert seen == [f"s{n}" for n in range(7)]
    # A key limited to one queue gets a full page of its own schedules, not a page of
    # everyone's with the others taken out.
    mine = await http.get("/v1/schedules", params={"limit": 2}, headers=keys["reader"])
    assert [s["name"] for s in mine.json()["schedules"]] == ["s0", "s3"]
    for bad in ({"limit": 0}, {"limit": 501}, {"after": "a\x00b"}):
        assert_problem(
            await http.get("/v1/schedules", params=bad, headers=keys["admin"]),
            422,
            "validation_error",
        )
