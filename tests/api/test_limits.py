"""Limits that protect the database: every input is bounded, JSON nests only so deep,
heartbeats write a lease's row at most once per interval, and queue names never reach
SQL or a NOTIFY channel as anything but data."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from app.core.config import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH, Settings
from app.db import listener
from app.jobs.payloads import depth
from tests.fixtures.queries import REPOSITORIES
from tests.helpers import assert_problem, enqueue, lease_one

REPO = Path(__file__).resolve().parents[2]
SPEC = json.loads((REPO / "openapi" / "openapi.json").read_text())


def _nested(levels: int) -> Any:
    """A JSON document `levels` deep: lists inside lists, with an object in the middle."""
    value: Any = "leaf"
    for level in range(levels):
        value = {"k": value} if level == levels // 2 else [value]
    return value


# ---- every input is bounded, as the spec says --------------------------------------------


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SPEC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _unbounded(schema: dict[str, Any], where: str) -> Iterator[str]:
    """Places in a request schema where a string, number or array has no upper bound."""
    schema = _resolve(schema)
    for key in ("anyOf", "oneOf", "allOf"):
        for i, option in enumerate(schema.get(key, [])):
            yield from _unbounded(option, f"{where}[{key}{i}]")
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return
    # A date-time is bounded by its grammar (and refused by the parser past it).
    if kind == "string" and "maxLength" not in schema and schema.get("format") != "date-time":
        yield where
    bounds = {key.removeprefix("exclusive").lower() for key in schema}  # either kind
    if kind in ("integer", "number") and not {"minimum", "maximum"} <= bounds:
        yield where
    if kind == "array":
        if "maxItems" not in schema:
            yield where
        yield from _unbounded(schema.get("items", {}), f"{where}[]")
    if kind == "object":
        for name, field in schema.get("properties", {}).items():
            yield from _unbounded(field, f"{where}.{name}")
    # No type at all (payload, result, details) or a free-form object (metadata): any JSON,
    # bounded as a whole by size and nesting depth.


# Headers W3C Trace Context says a receiver ignores when malformed (too long included:
# app.core.tracecontext), never refuses; the server's header limit bounds them.
IGNORED_WHEN_MALFORMED = frozenset({"header:traceparent", "header:tracestate"})


def test_every_request_string_number_and_list_has_a_bound() -> None:
    unbounded: list[str] = []
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            label = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                if f"{parameter['in']}:{parameter['name']}" in IGNORED_WHEN_MALFORMED:
                    continue
                where = f"{label} {parameter['in']}:{parameter['name']}"
                unbounded += _unbounded(parameter["schema"], where)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                unbounded += _unbounded(media["schema"], f"{label} body")
    assert unbounded == []


TOKEN = "1-" + "0" * 32


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/leases", {"queues": ["q"], "worker_id": "w" * 256}, ["body", "worker_id"]),
        ("/v1/leases", {"queues": ["q" * 129], "worker_id": "w"}, ["body", "queues", 0]),
        (
            "/v1/leases",
            {"queues": ["q"], "types": ["t" * 129], "worker_id": "w"},
            ["body", "types"],
        ),
        ("/v1/leases", {"queues": ["q"] * 101, "worker_id": "w"}, ["body", "queues"]),
        (
            "/v1/leases",
            {"queues": ["q"], "types": ["t"] * 101, "worker_id": "w"},
            ["body", "types"],
        ),
        ("/v1/leases", {"queues": ["q"], "worker_id": "w", "wait_seconds": 30.5}, ["body"]),
        ("/v1/leases", {"queues": ["q"], "worker_id": "w", "wait_seconds": -0.1}, ["body"]),
        ("/v1/queues/q/jobs/batch", {"jobs": [{"type": "t"}] * 1001}, ["body", "jobs"]),
        (f"/v1/leases/{TOKEN}/heartbeat", {"extend_seconds": 43201}, ["body", "extend_seconds"]),
        (
            f"/v1/leases/{TOKEN}/heartbeat",
            {"progress": {"message": "m" * 4097}},
            ["body", "progress", "message"],
        ),
        (f"/v1/leases/{TOKEN}/fail", {"error": {"type": "E" * 256}}, ["body", "error", "type"]),
        (
            f"/v1/leases/{TOKEN}/fail",
            {"error": {"type": "E", "message": "m" * (1024 * 1024 + 1)}},
            ["body", "error", "message"],
        ),
        ("/v1/acks", {"acks": [{"lease_id": "1" * 101, "outcome": "complete"}]}, ["body", "acks"]),
        (f"/v1/leases/{'1' * 101}/complete", {}, ["path", "lease_id"]),
        ("/v1/queues/q/settings", {"max_backlog": 10**6 + 1}, ["body", "max_backlog"]),
    ],
)
async def test_over_the_bound_is_422_naming_the_field(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], field: list[Any]
) -> None:
    method = client.put if path.endswith("/settings") else client.post
    problem = assert_problem(await method(path, json=body), 422, "validation_error")
    assert field in [error["loc"][: len(field)] for error in problem["errors"]], problem


async def _at_the_bound(client: httpx.AsyncClient, field: str, value: Any) -> httpx.Response:
    """One request with `value` for `field`, which is checked on its own."""
    if field == "queue":
        return await client.post(f"/v1/queues/{value}/jobs", json={"type": "t"})
    if field == "queues":
        return await client.post("/v1/leases", json={"queues": [value], "worker_id": "w"})
    if field == "extend_seconds":
        await enqueue(client)
        token = (await lease_one(client))["lease_id"]
        return await client.post(f"/v1/leases/{token}/heartbeat", json={field: value})
    return await client.post("/v1/queues/q/jobs", json={"type": "t", field: value})


NAME = "N" + "a_.:-9" * 21 + "z"  # 128 characters, every one a name may hold


@pytest.mark.parametrize(
    ("field", "value", "loc"),
    [
        ("priority", 32767, None),
        ("priority", -32768, None),
        ("lease_seconds", 1, None),
        ("lease_seconds", 43200, None),
        ("extend_seconds", 43200, None),
        ("type", NAME, None),
        ("queue", NAME, None),
        ("queues", NAME, None),
        *(("type", f"{c}name", ["body", "type"]) for c in "_.:-"),
        *(("queue", f"{c}name", ["path", "queue"]) for c in "_.:-"),
        *(("queues", f"{c}name", ["body", "queues", 0]) for c in "_.:-"),
    ],
)
async def test_at_the_bound_is_accepted_and_names_start_with_a_letter_or_digit(
    client: httpx.AsyncClient, field: str, value: Any, loc: list[Any] | None
) -> None:
    assert len(NAME) == 128
    response = await _at_the_bound(client, field, value)
    if loc is not None:
        problem = assert_problem(response, 422, "validation_error")
        assert [error["loc"] for error in problem["errors"]] == [loc], problem
        return
    assert response.status_code == (200 if field in ("extend_seconds", "queues") else 201)
    body = response.json()
    if field == "extend_seconds":
        left = datetime.fromisoformat(body["expires_at"]) - datetime.now(UTC)
        assert timedelta(seconds=value - 5) < left <= timedelta(seconds=value)
    elif field == "queues":
        assert body == {"leases": []}
    else:
        assert body[field] == value


async def test_long_query_and_header_values_are_422(client: httpx.AsyncClient) -> None:
    for params in ({"queue": "q" * 129}, {"type": "t" * 129}):
        assert_problem(await client.get("/v1/jobs", params=params), 422, "validation_error")
    response = await client.post(
        "/v1/queues/q/jobs", json={"type": "t"}, headers={"Idempotency-Key": "k" * 256}
    )
    assert_problem(response, 422, "validation_error")


# ---- JSON nesting depth -------------------------------------------------------------------


def test_the_depth_helper_counts_arrays_and_objects() -> None:
    values: list[Any] = [None, 1, "s", [], {}, [1, {"a": [2]}], _nested(40)]
    assert [depth(value) for value in values] == [0, 0, 0, 1, 1, 3, 40]
    assert depth(_nested(1000), stop_after=5) == 6  # stops as soon as it knows


async def test_payloads_nest_up_to_the_limit(client: httpx.AsyncClient) -> None:
    deepest = _nested(DEFAULT_MAX_JSON_DEPTH)
    job = await enqueue(
        client, payload=deepest, metadata={"m": _nested(DEFAULT_MAX_JSON_DEPTH - 1)}
    )
    assert job["payload"] == deepest
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["payload"] == deepest


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/queues/q/jobs", {"type": "t", "payload": _nested(33)}, ["body", "payload"]),
        ("/v1/queues/q/jobs", {"type": "t", "metadata": {"m": _nested(32)}}, ["body", "metadata"]),
        (
            "/v1/queues/q/jobs/batch",
            {"jobs": [{"type": "t"}, {"type": "t", "payload": _nested(33)}]},
            ["body", "jobs", 1, "payload"],
        ),
        # 300 levels used to be stored, then answered with a 500 (and so was every later
        # read of the job): the response serializer stops at 255 levels.
        ("/v1/queues/q/jobs", {"type": "t", "payload": _nested(300)}, ["body", "payload"]),
    ],
)
async def test_too_deep_json_is_refused_before_it_is_stored(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    path: str,
    body: dict[str, Any],
    loc: list[Any],
) -> None:
    problem = assert_problem(await client.post(path, json=body), 422, "validation_error")
    assert problem["errors"] == [
        {"loc": loc, "msg": "JSON nests more than 32 levels deep (arrays and objects)",
         "type": "json_too_deep"}
    ]  # fmt: skip
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 0


async def test_results_and_error_details_are_bounded_too(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    deep = _nested(DEFAULT_MAX_JSON_DEPTH + 1)
    for path, body, loc in (
        ("complete", {"result": deep}, ["body", "result"]),
        ("fail", {"error": {"type": "E", "details": deep}}, ["body", "error", "details"]),
    ):
        problem = assert_problem(
            await client.post(f"/v1/leases/{token}/{path}", json=body), 422, "validation_error"
        )
        assert problem["errors"][0]["type"] == "json_too_deep"
        assert problem["errors"][0]["loc"] == loc
    # In a batch the refusal is that ack's answer alone (tests/api/test_finish.py has more).
    acks = {"acks": [{"lease_id": token, "outcome": "complete", "result": deep}]}
    response = await client.post("/v1/acks", json=acks)
    assert response.status_code == 200
    (result,) = response.json()["results"]
    assert (result["status"], result["code"]) == (422, "validation_error")
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["state"] == "running"


async def test_a_body_too_deep_to_parse_is_400(client: httpx.AsyncClient) -> None:
    body = '{"type": "t", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = await client.post(
        "/v1/queues/q/jobs", content=body, headers={"content-type": "application/json"}
    )
    problem = assert_problem(response, 400, "invalid_json")
    assert "deeply" in problem["detail"]


async def test_the_depth_limit_is_a_setting(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    client: httpx.AsyncClient = await client_factory(app_factory(max_json_depth=2))
    await enqueue(client, payload={"a": [1]})
    response = await client.post("/v1/queues/q/jobs", json={"type": "t", "payload": {"a": [[]]}})
    assert assert_problem(response, 422, "validation_error")["errors"][0]["type"] == (
        "json_too_deep"
    )
    with pytest.raises(ValidationError):
        Settings(max_json_depth=MAX_JSON_DEPTH + 1)


# ---- heartbeats write a lease's row at most once per interval ------------------------------


async def _row_version(db: asyncpg.Connection, job_id: int) -> str:
    """The row's xmin: it changes exactly when an UPDATE writes a new version of the row."""
    version: str = await db.fetchval("SELECT xmin::text FROM jobq.jobs WHERE id = $1", job_id)
    return version


async def _beat(client: httpx.AsyncClient, token: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/leases/{token}/heartbeat", json=body)
    assert response.status_code == 200, response.text
    beat: dict[str, Any] = response.json()
    return beat


@pytest.fixture
async def slow_beats(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> httpx.AsyncClient:
    """A client whose heartbeats may write a lease's row once every 30 s."""
    client: httpx.AsyncClient = await client_factory(app_factory(heartbeat_min_interval_seconds=30))
    return client


async def test_a_heartbeat_burst_writes_the_row_once(
    slow_beats: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    job = await enqueue(slow_beats, lease_seconds=600)
    token = (await lease_one(slow_beats))["lease_id"]
    leased = await _row_version(db, job["id"])
    first = await _beat(slow_beats, token, progress={"percent": 1})
    assert first["progress_recorded"] is True  # the first progress is stored at once
    written = await _row_version(db, job["id"])
    assert written != leased
    versions = set()
    for i in range(2, 100):
        beat = await _beat(slow_beats, token, progress={"percent": i, "stage": f"s{i}"})
        assert beat["progress_recorded"] is False
        assert beat["expires_at"] == first["expires_at"]  # the lease stands as written
        versions.add(await _row_version(db, job["id"]))
    assert versions == {written}, "a coalesced heartbeat must not write the row"
    progress = (await slow_beats.get(f"/v1/jobs/{job['id']}")).json()["progress"]
    assert (progress["percent"], progress["stage"]) == (1, None)

    longer = await _beat(slow_beats, token, extend_seconds=1200)  # a new length: written now
    assert longer["progress_recorded"] is False  # it sent none
    assert datetime.fromisoformat(longer["expires_at"]) > datetime.fromisoformat(
        first["expires_at"]
    ) + timedelta(seconds=500)
    assert await _row_version(db, job["id"]) != written


async def test_a_coalesced_heartbeat_still_keeps_most_of_the_lease(
    slow_beats: httpx.AsyncClient,
) -> None:
    await enqueue(slow_beats, lease_seconds=5)  # slack: a tenth of the lease, not 30 s
    token = (await lease_one(slow_beats))["lease_id"]
    for _ in range(5):
        sent = datetime.now().astimezone()
        beat = await _beat(slow_beats, token)
        left = datetime.fromisoformat(beat["expires_at"]) - sent
        assert left >= timedelta(seconds=4.5), left
        await asyncio.sleep(0.3)


async def test_after_the_interval_a_heartbeat_writes_again(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    client = await client_factory(app_factory(heartbeat_min_interval_seconds=0.5))
    job = await enqueue(client, lease_seconds=60)
    token = (await lease_one(client))["lease_id"]
    assert (await _beat(client, token, progress={"percent": 10}))["progress_recorded"] is True
    soon = await _beat(client, token, progress={"percent": 20})
    assert soon["progress_recorded"] is False
    await asyncio.sleep(0.6)
    later = await _beat(client, token, progress={"percent": 30})
    assert later["progress_recorded"] is True
    assert later["expires_at"] > soon["expires_at"]
    row = await db.fetchrow("SELECT progress_percent FROM jobq.jobs WHERE id = $1", job["id"])
    assert row is not None and row["progress_percent"] == 30


async def test_an_interval_of_zero_writes_every_heartbeat(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    client = await client_factory(app_factory(heartbeat_min_interval_seconds=0))
    job = await enqueue(client)
    token = (await lease_one(client))["lease_id"]
    versions = set()
    for i in range(5):
        assert (await _beat(client, token, progress={"percent": i}))["progress_recorded"]
        versions.add(await _row_version(db, job["id"]))
    assert len(versions) == 5


async def test_a_coalesced_heartbeat_on_a_lost_lease_is_still_409(
    slow_beats: httpx.AsyncClient,
) -> None:
    await enqueue(slow_beats)
    token = (await lease_one(slow_beats))["lease_id"]
    await _beat(slow_beats, token)
    await slow_beats.post(f"/v1/leases/{token}/complete")
    response = await slow_beats.post(f"/v1/leases/{token}/heartbeat")
    assert assert_problem(response, 409, "lease_lost")["state"] == "succeeded"
    unknown = await slow_beats.post(f"/v1/leases/{token.split('-')[0]}-{'f' * 32}/heartbeat")
    assert_problem(unknown, 404, "lease_not_found")


# ---- queue names are data, never SQL or a channel name ---------------------------------------

HOSTILE_NAMES = [
    "q'; DROP TABLE jobq.jobs; --",
    "q\"; NOTIFY jobq_due, 'x",
    "q$1",
    "q\\",
    "q%00",
    "a b",
    "tab\tname",
    "q\nNOTIFY",
    "ünïcode",
    "(select 1)",
    "q" * 129,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_hostile_queue_names_are_refused_everywhere(
    client: httpx.AsyncClient, db: asyncpg.Connection, name: str
) -> None:
    from urllib.parse import quote

    path = quote(name, safe="")
    for response in (
        await client.post(f"/v1/queues/{path}/jobs", json={"type": "t"}),
        await client.post(f"/v1/queues/{path}/jobs/batch", json={"jobs": [{"type": "t"}]}),
        await client.put(f"/v1/queues/{path}/settings", json={"max_backlog": 1}),
        await client.get(f"/v1/queues/{path}/settings"),
        await client.get("/v1/jobs", params={"queue": name}),
        await client.post("/v1/leases", json={"queues": [name], "worker_id": "w"}),
        await client.post("/v1/leases", json={"queues": ["q"], "types": [name], "worker_id": "w"}),
        await client.post("/v1/queues/q/jobs", json={"type": name}),
    ):
        assert response.status_code in (404, 422), (name, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 0
    assert await db.fetchval("SELECT count(*) FROM jobq.queues") == 0


def test_the_notify_channel_is_a_constant_and_queue_names_travel_as_data() -> None:
    assert re.fullmatch(r"[a-z_]+", listener.CHANNEL)
    assert re.fullmatch(r"[a-z_]+", listener.KEYS_CHANNEL)
    statements = {
        f"{domain.__name__}.{name}": statement.sql
        for domain in REPOSITORIES
        for name, statement in domain.QUERIES.statements.items()
    }
    announcing = {name: sql for name, sql in statements.items() if "jobq.announce_due(" in sql}
    notifying = {name: sql for name, sql in statements.items() if "pg_notify" in sql}
    assert announcing and notifying, "the announcing statements were not found"
    for sql in announcing.values():
        # A queue is a column's value, announced through the one function that notifies.
        assert re.search(r"jobq\.announce_due\((j\.)?(queue|name), ", sql), sql
    for sql in notifying.values():
        # The channel is a constant; a key's lookup id or a queue's name is a column's
        # value, in the payload.
        (channel,) = re.findall(r"pg_notify\(([^,]+),", sql)
        assert channel in (f"'{listener.KEYS_CHANNEL}'", f"'{listener.SETTINGS_CHANNEL}'"), sql
        assert re.search(
            r"pg_notify\('jobq_keys', '\w+ ' \|\| lookup_id\)"
            r"|pg_notify\('jobq_settings', (name|queue)\)",
            sql,
        ), sql
    # jobq.announce_due notifies the listener's channel, with the queue in the payload.
    migration = (REPO / "alembic" / "versions" / "0008_sql_building_blocks.py").read_text()
    assert f"pg_notify('{listener.CHANNEL}', concat_ws(' ', queue," in migration
    # and the jobs table's trigger announces a watched job's end with its id alone.
    trigger = (REPO / "alembic" / "versions" / "0010_dependencies.sql").read_text()
    assert f"pg_notify('{listener.FINISHED_CHANNEL}', NEW.id::text)" in trigger
    # No statement is built from a request value: each is fixed text with $n parameters,
    # and nowhere else in the app does SQL or LISTEN/NOTIFY take part of a name.
    for path in (REPO / "app").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"\bNOTIFY\s+[^j]", text, re.IGNORECASE), path
        for call in re.findall(r"add_listener\(([^,]+),", text):
            assert call.strip() in (
                "CHANNEL",
                "KEYS_CHANNEL",
                "FINISHED_CHANNEL",
                "SETTINGS_CHANNEL",
                "EVENTS_CHANNEL",
            ), (path, call)


async def test_queue_names_with_every_allowed_character_round_trip(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    name = "A9._:-z" + "x" * 121  # 128 characters, every punctuation the pattern allows
    job = await enqueue(client, name)
    assert job["queue"] == name
    await client.put(f"/v1/queues/{name}/settings", json={"max_backlog": 5})
    assert (await client.get(f"/v1/queues/{name}/settings")).json()["max_backlog"] == 5
    waiting = asyncio.create_task(
        client.post("/v1/leases", json={"queues": [name], "worker_id": "w", "wait_seconds": 5})
    )
    leased = (await waiting).json()["leases"]
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert await db.fetchval("SELECT queue FROM jobq.jobs") == name
