"""Every timestamp the API takes is bounded: a valid RFC 3339 time outside jobq's range
is a 422 naming the field, never a 500 (asyncpg cannot encode years beyond 1..9999)."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from app.core import timestamps
from tests.helpers import assert_problem, enqueue

EDGES = [
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
    "1969-12-31T23:59:59Z",  # before the range
    "9999-12-31T00:00:00Z",  # after it
]


async def _failed_job(client: httpx.AsyncClient, db: asyncpg.Connection) -> int:
    job = await enqueue(client, "q", max_attempts=1)
    await db.execute("UPDATE jobq.jobs SET state = 'failed', finished_at = now()")
    return int(job["id"])


def _requests(job_id: int, when: str) -> list[tuple[str, dict[str, Any], tuple[Any, ...]]]:
    return [
        ("/v1/queues/q/jobs", {"type": "t", "run_at": when}, ("body", "run_at")),
        ("/v1/queues/q/jobs/batch", {"jobs": [{"type": "t", "run_at": when}]},
         ("body", "jobs", 0, "run_at")),
        (f"/v1/jobs/{job_id}/retry", {"run_at": when}, ("body", "run_at")),
        ("/v1/queues/q/failed/retry", {"failed_since": when}, ("body", "failed_since")),
    ]  # fmt: skip


@pytest.mark.parametrize("when", EDGES)
async def test_a_time_outside_the_range_is_refused_by_name(
    client: httpx.AsyncClient, db: asyncpg.Connection, when: str
) -> None:
    job_id = await _failed_job(client, db)
    for path, body, field in _requests(job_id, when):
        response = await client.post(path, json=body)
        problem = assert_problem(response, 422, "validation_error")
        (error,) = problem["errors"]
        assert tuple(error["loc"]) == field, (path, error)
        assert error["type"] == "datetime_range"
        assert timestamps.RANGE in error["msg"]
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1
    assert await db.fetchval("SELECT state::text FROM jobq.jobs") == "failed"


async def test_the_range_ends_are_accepted_in_any_offset(client: httpx.AsyncClient) -> None:
    early = await enqueue(client, "q", run_at="1970-01-01T09:00:00+09:00")
    late = await enqueue(client, "q", run_at="9999-12-30T09:59:59.999999-14:00")
    assert early["run_at"] == "1970-01-01T00:00:00Z"
    assert late["run_at"] == "9999-12-30T23:59:59.999999Z"


@pytest.mark.parametrize("text", ["0.5", "1700000000", "2026-13", "now", "2026-11-24"])
async def test_a_timestamp_is_rfc3339_text_not_a_number_in_a_string(
    client: httpx.AsyncClient, text: str
) -> None:
    """Lax parsing would read "0.5" or "1700000000" as Unix time, in a body or a query."""
    body = await client.post("/v1/queues/q/jobs", json={"type": "t", "run_at": text})
    assert assert_problem(body, 422, "validation_error")["errors"][0]["loc"] == [
        "body",
        "run_at",
    ]
    query = await client.get("/v1/jobs", params={"created_before": text})
    assert assert_problem(query, 422, "validation_error")["errors"][0]["loc"] == [
        "query",
        "created_before",
    ]
