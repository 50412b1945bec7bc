"""Bad input gets a clear problem+json error, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import assert_problem, enqueue, lease_one

TOKEN = "1-" + "0" * 32


async def _count(db: asyncpg.Connection) -> int:
    count: int = await db.fetchval("SELECT count(*) FROM jobq.jobs")
    return count


async def test_malformed_json_is_400(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    for body in (b"{", b'{"type": "t",}', b"[1, 2", b"\xff\xfe not utf-8", b"nul\x00"):
        response = await client.post(
            "/v1/queues/q/jobs", content=body, headers={"content-type": "application/json"}
        )
        assert_problem(response, 400, "invalid_json")
    assert await _count(db) == 0


async def test_malformed_json_says_where(client: httpx.AsyncClient) -> None:
    """The decoder's reason, with the line, column and character it stopped at."""
    cases = (
        (b'{\n  "type": "t",\n  "payload": }', "Expecting value: line 3 column 14 (char 30)"),
        (b'{"type": "t"', "Expecting ',' delimiter: line 1 column 13 (char 12)"),
        ('{"type": "\u00e9t\u00e9",,}'.encode(), "line 1 column 16 (char 15)"),
    )
    for body, where in cases:
        response = await client.post(
            "/v1/queues/q/jobs", content=body, headers={"content-type": "application/json"}
        )
        problem = assert_problem(response, 400, "invalid_json")
        assert problem["detail"].endswith(where), problem["detail"]


async def test_a_body_that_is_not_json_is_415(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/q/jobs",
        content=b"type=t",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    body = assert_problem(response, 415, "unsupported_media_type")
    assert "application/json" in body["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, ["body", "type"]),
        ({"type": ""}, ["body", "type"]),
        ({"type": "has space"}, ["body", "type"]),
        ({"type": "x" * 129}, ["body", "type"]),
        ({"type": "-leading"}, ["body", "type"]),
        ({"type": 5}, ["body", "type"]),
        ({"type": "t", "priority": 32768}, ["body", "priority"]),
        ({"type": "t", "priority": -32769}, ["body", "priority"]),
        ({"type": "t", "priority": "high"}, ["body", "priority"]),
        ({"type": "t", "max_attempts": 0}, ["body", "max_attempts"]),
        ({"type": "t", "lease_seconds": 0}, ["body", "lease_seconds"]),
        ({"type": "t", "lease_seconds": 43201}, ["body", "lease_seconds"]),
        ({"type": "t", "delay_seconds": -1}, ["body", "delay_seconds"]),
        ({"type": "t", "delay_seconds": 1e300}, ["body", "delay_seconds"]),
        ({"type": "t", "run_at": "tomorrow"}, ["body", "run_at"]),
        ({"type": "t", "run_at": "2030-01-01T00:00:00"}, ["body", "run_at"]),
        ({"type": "t", "idempotency_key": "k" * 256}, ["body", "idempotency_key"]),
        ({"type": "t", "idempotency_key": "a\u0000b"}, ["body", "idempotency_key"]),
        ({"type": "t", "idempotency_key": "\ud800"}, ["body", "idempotency_key"]),
        ({"type": "t", "metadata": [1]}, ["body", "metadata"]),
        ({"type": "t", "priorty": 3}, ["body", "priorty"]),
        ({"type": "t", "payload": {"s": "nul\u0000"}}, ["body", "payload"]),
        ({"type": "t", "payload": {"s": "\udc00"}}, ["body", "payload"]),
    ],
)
async def test_invalid_job_fields_are_422_with_the_field_named(
    client: httpx.AsyncClient, db: asyncpg.Connection, body: dict[str, Any], field: list[str]
) -> None:
    # json.dumps escapes lone surrogates and NULs, as a hostile client's JSON would
    response = await client.post(
        "/v1/queues/q/jobs", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    problem = assert_problem(response, 422, "validation_error")
    assert field in [error["loc"][: len(field)] for error in problem["errors"]], problem
    assert all("input" not in error for error in problem["errors"])
    assert await _count(db) == 0


async def test_nan_in_a_payload_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/q/jobs",
        content=b'{"type": "t", "payload": NaN}',
        headers={"content-type": "application/json"},
    )
    assert_problem(response, 422, "validation_error")


@pytest.mark.parametrize(
    "queue", ["has space", "-x", "_x", "q" * 129, "caf%C3%A9", "a%00b", "a%5Cb", "%2E%2E"]
)
async def test_bad_queue_names_in_the_path_are_422(
    client: httpx.AsyncClient, db: asyncpg.Connection, queue: str
) -> None:
    response = await client.post(f"/v1/queues/{queue}/jobs", json={"type": "t"})
    problem = assert_problem(response, 422, "validation_error")
    assert [error["loc"] for error in problem["errors"]] == [["path", "queue"]], problem
    assert await _count(db) == 0


@pytest.mark.parametrize("queue", ["a%2Fb", ""])
async def test_a_queue_path_that_cannot_route_is_404(
    client: httpx.AsyncClient, db: asyncpg.Connection, queue: str
) -> None:
    # An encoded slash is a path separator by the time routing sees it: /v1/queues/a/b/jobs.
    response = await client.post(f"/v1/queues/{queue}/jobs", json={"type": "t"})
    assert_problem(response, 404, "not_found")
    assert await _count(db) == 0


async def test_payload_over_the_limit_is_413(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    big = "x" * (256 * 1024)
    response = await client.post("/v1/queues/q/jobs", json={"type": "t", "payload": big})
    problem = assert_problem(response, 413, "payload_too_large")
    assert problem["limit_bytes"] == 256 * 1024
    just_fits = "x" * (256 * 1024 - 2)  # the two quotes make it exactly the limit
    assert (
        await client.post("/v1/queues/q/jobs", json={"type": "t", "payload": just_fits})
    ).status_code == 201
    batch = {"jobs": [{"type": "t"}, {"type": "t", "payload": big}]}
    assert_problem(
        await client.post("/v1/queues/q/jobs/batch", json=batch), 413, "payload_too_large"
    )
    assert await _count(db) == 1  # the batch was refused whole


async def test_results_and_errors_obey_the_payload_limit(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    big = "x" * (256 * 1024)
    assert_problem(
        await client.post(f"/v1/leases/{token}/complete", json={"result": big}),
        413,
        "payload_too_large",
    )
    assert_problem(
        await client.post(
            f"/v1/leases/{token}/fail", json={"error": {"type": "E", "details": big}}
        ),
        413,
        "payload_too_large",
    )
    still = (await client.post(f"/v1/leases/{token}/heartbeat")).json()
    assert still["lease_id"] == token  # nothing changed: the lease is still live


@pytest.fixture
async def small_client(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> AsyncIterator[httpx.AsyncClient]:
    yield await client_factory(
        app_factory(
            max_request_bytes=1000,
            max_payload_bytes=100,
            max_enqueue_batch=3,
            max_lease_batch=2,
            max_lease_seconds=30,
            default_lease_seconds=10,
        )
    )


async def test_request_body_over_the_limit_is_refused_unread(
    small_client: httpx.AsyncClient,
) -> None:
    response = await small_client.post(
        "/v1/queues/q/jobs", content=b"x" * 1001, headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(100):
            yield b" " * 100

    chunked = await small_client.post(
        "/v1/queues/q/jobs", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_problem(chunked, 413, "payload_too_large")

    async def small() -> AsyncIterator[bytes]:
        yield b'{"type":'
        yield b' "t"}'

    assert (
        await small_client.post(
            "/v1/queues/q/jobs", content=small(), headers={"content-type": "application/json"}
        )
    ).status_code == 201


async def test_tunable_limits_are_enforced(small_client: httpx.AsyncClient) -> None:
    assert_problem(
        await small_client.post("/v1/queues/q/jobs", json={"type": "t", "payload": "y" * 200}),
        413,
        "payload_too_large",
    )
    assert_problem(
        await small_client.post("/v1/queues/q/jobs/batch", json={"jobs": [{"type": "t"}] * 4}),
        422,
        "validation_error",
    )
    assert_problem(
        await small_client.post("/v1/queues/q/jobs", json={"type": "t", "lease_seconds": 31}),
        422,
        "validation_error",
    )
    assert_problem(
        await small_client.post(
            "/v1/leases", json={"queues": ["q"], "worker_id": "w", "max_jobs": 3}
        ),
        422,
        "validation_error",
    )
    assert_problem(
        await small_client.post(
            "/v1/leases", json={"queues": ["q"], "worker_id": "w", "lease_seconds": 31}
        ),
        422,
        "validation_error",
    )


@pytest.mark.parametrize(
    "body",
    [
        {"worker_id": "w"},
        {"queues": [], "worker_id": "w"},
        {"queues": ["q"]},
        {"queues": ["q"], "worker_id": ""},
        {"queues": ["bad name"], "worker_id": "w"},
        {"queues": ["q"], "worker_id": "w", "max_jobs": 0},
        {"queues": ["q"], "worker_id": "w", "max_jobs": 101},
        {"queues": ["q"], "worker_id": "w", "lease_seconds": 43201},
        {"queues": "q", "worker_id": "w"},
    ],
)
async def test_invalid_lease_requests_are_422(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    assert_problem(await client.post("/v1/leases", json=body), 422, "validation_error")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("heartbeat", {"progress": {"percent": 101}}),
        ("heartbeat", {"progress": {"percent": -1}}),
        ("heartbeat", {"extend_seconds": 0}),
        ("heartbeat", {"progress": {"stage": "s" * 256}}),
        ("fail", {}),
        ("fail", {"error": {"message": "no type"}}),
        ("fail", {"error": {"type": "E"}, "retry_after_seconds": -5}),
        ("fail", {"error": {"type": "E"}, "retryable": "maybe"}),
        ("complete", {"result": 1, "extra": True}),
    ],
)
async def test_invalid_lease_calls_are_422_and_change_nothing(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    assert_problem(
        await client.post(f"/v1/leases/{token}/{path}", json=body), 422, "validation_error"
    )
    job = (await client.get(f"/v1/jobs/{token.split('-')[0]}")).json()
    assert job["state"] == "running" and job["progress"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"acks": []},
        {"acks": [{"lease_id": TOKEN}]},
        {"acks": [{"lease_id": TOKEN, "outcome": "explode"}]},
        {"acks": [{"lease_id": TOKEN, "outcome": "fail"}]},
        {"acks": [{"outcome": "complete"}]},
        {"acks": [{"lease_id": TOKEN, "outcome": "complete"}] * 1001},
    ],
)
async def test_invalid_acks_are_422(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert_problem(await client.post("/v1/acks", json=body), 422, "validation_error")


async def test_unknown_routes_and_methods_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/nothing"), 404, "not_found")
    assert_problem(await client.delete("/v1/leases"), 405, "method_not_allowed")
    assert_problem(await client.get("/v1/jobs/0"), 422, "validation_error")
    assert_problem(await client.get("/v1/jobs/abc"), 422, "validation_error")
    assert_problem(await client.get("/v1/jobs/99999999999999999999"), 422, "validation_error")
    assert_problem(await client.get("/v1/jobs", params={"limit": 0}), 422, "validation_error")
    assert_problem(
        await client.get("/v1/jobs", params={"state": "zombie"}), 422, "validation_error"
    )
    assert_problem(await client.get("/v1/jobs", params={"after": -1}), 422, "validation_error")


GARBAGE: list[Any] = [
    None,
    0,
    -1,
    2**70,
    1.5,
    "",
    "x",
    [],
    [None],
    {},
    {"": None},
    {"type": None},
    "\u0000",
    True,
    [{"a": [{}]}] * 3,
]


async def test_no_garbage_body_produces_a_server_error(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    posts = [
        "/v1/queues/q/jobs",
        "/v1/queues/q/jobs/batch",
        "/v1/leases",
        "/v1/acks",
        f"/v1/leases/{token}/heartbeat",
        f"/v1/leases/{token}/complete",
        f"/v1/leases/{token}/fail",
    ]
    fields = [
        "type",
        "payload",
        "priority",
        "run_at",
        "delay_seconds",
        "max_attempts",
        "lease_seconds",
        "idempotency_key",
        "metadata",
        "jobs",
        "queues",
        "types",
        "max_jobs",
        "worker_id",
        "acks",
        "progress",
        "extend_seconds",
        "error",
        "result",
        "retryable",
        "retry_after_seconds",
    ]
    for path in posts:
        for value in GARBAGE:
            bodies: list[Any] = [value, *({name: value} for name in fields)]
            for body in bodies:
                response = await client.post(
                    path, content=json.dumps(body), headers={"content-type": "application/json"}
                )
                assert response.status_code < 500, (path, body, response.text)
                if response.status_code >= 400:
                    assert response.headers["content-type"].startswith("application/problem+json")


# Found by the Schemathesis run (tests/api/test_fuzz.py):


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/queues/q/jobs", {"type": "t", "priority": True}, ["body", "priority"]),
        ("/v1/queues/q/jobs", {"type": "t", "priority": "5"}, ["body", "priority"]),
        ("/v1/queues/q/jobs", {"type": "t", "max_attempts": True}, ["body", "max_attempts"]),
        ("/v1/queues/q/jobs", {"type": "t", "delay_seconds": False}, ["body", "delay_seconds"]),
        ("/v1/queues/q/jobs", {"type": "t", "lease_seconds": "60"}, ["body", "lease_seconds"]),
        ("/v1/leases", {"queues": ["q"], "worker_id": "w", "max_jobs": True}, ["body", "max_jobs"]),
        (
            "/v1/leases",
            {"queues": ["q"], "worker_id": "w", "wait_seconds": "1"},
            ["body", "wait_seconds"],
        ),
        (
            "/v1/acks",
            {"acks": [{"lease_id": TOKEN, "outcome": "fail", "error": {"type": "E"},
                       "retry_after_seconds": False}]},
            ["body", "acks", 0, "fail", "retry_after_seconds"],
        ),
        (
            "/v1/acks",
            {"acks": [{"lease_id": TOKEN, "outcome": "fail", "error": {"type": "E"},
                       "retryable": 1}]},
            ["body", "acks", 0, "fail", "retryable"],
        ),
        ("/v1/queues/q/failed/retry", {"reset_attempts": 0}, ["body", "reset_attempts"]),
        ("/v1/queues/q/failed/retry", {"limit": True}, ["body", "limit"]),
        ("/v1/jobs/1/retry", {"reset_attempts": "yes"}, ["body", "reset_attempts"]),
        ("/v1/queues/q/jobs", {"type": "t", "run_at": 0}, ["body", "run_at"]),
        ("/v1/queues/q/failed/retry", {"failed_since": 0}, ["body", "failed_since"]),
        ("/v1/jobs/1/retry", {"run_at": 1.5e9}, ["body", "run_at"]),
    ],
)  # fmt: skip
async def test_numbers_booleans_and_times_are_what_the_spec_says(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    path: str,
    body: dict[str, Any],
    field: list[Any],
) -> None:
    # Lax parsing read `true` as 1, "5" as 5, 0 as a bool and a number as a Unix time,
    # where the spec says number, boolean or date-time.
    problem = assert_problem(await client.post(path, json=body), 422, "validation_error")
    assert field in [error["loc"][: len(field)] for error in problem["errors"]], problem
    assert await _count(db) == 0


async def test_whole_numbers_written_as_decimals_are_numbers(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, priority=5.0, max_attempts=3.0, lease_seconds=60.0)
    assert (job["priority"], job["max_attempts"], job["lease_seconds"]) == (5, 3, 60)


async def test_405_allows_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    # Two routes share the settings path; the router named only the first one's methods.
    response = await client.delete("/v1/queues/q/settings")
    assert_problem(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, PUT"
    assert (await client.delete("/v1/leases")).headers["allow"] == "POST"


async def test_a_concurrency_key_with_nul_is_422_on_every_enqueue_path(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    parent = await enqueue(client, "q")
    job = {"type": "t", "concurrency_key": "k\x00"}
    for path, body, loc in (
        ("/v1/queues/q/jobs", job, ["body", "concurrency_key"]),
        ("/v1/queues/q/jobs", {**job, "depends_on": [parent["id"]]}, ["body", "concurrency_key"]),
        ("/v1/queues/q/jobs/batch", {"jobs": [job]}, ["body", "jobs", 0, "concurrency_key"]),
        (
            "/v1/queues/q/jobs/batch",
            {"jobs": [{"type": "t"}, {**job, "depends_on": [{"ref": 0}]}]},
            ["body", "jobs", 1, "concurrency_key"],
        ),
    ):
        problem = assert_problem(await client.post(path, json=body), 422, "validation_error")
        assert problem["errors"][0]["loc"] == loc, problem
    assert await _count(db) == 1


async def test_list_filters_with_nul_are_422(client: httpx.AsyncClient) -> None:
    for params in ({"error_type": "E\x00"}, {"key_contains": "k\x00"}):
        answer = await client.get("/v1/jobs", params=params)
        problem = assert_problem(answer, 422, "validation_error")
        assert problem["errors"][0]["loc"][0] == "query", problem
