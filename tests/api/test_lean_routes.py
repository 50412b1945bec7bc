"""The hot routes answer their common requests through `app.api.lean`, and answer every
request as FastAPI's own handler does (which a query string makes them use)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.keys.routing import KeyedRoute
from tests.helpers import enqueue, lease_one

HOT = [
    ("POST", "/v1/queues/{queue}/jobs"),
    ("POST", "/v1/leases"),
    ("POST", "/v1/leases/{lease_id}/heartbeat"),
    ("POST", "/v1/leases/{lease_id}/complete"),
    ("POST", "/v1/leases/{lease_id}/fail"),
    ("POST", "/v1/acks"),
]
JSON = "application/json"
# What differs between two answers to the same request: ids, tokens and times.
_VARYING = re.compile(rb'"(id|lease_id|[a-z_]+_at)":("[^"]*"|\d+)')


def test_the_hot_routes_are_lean(app: FastAPI) -> None:
    lean = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, KeyedRoute) and route.lean
        for method in route.methods or ()
    }
    assert set(HOT) <= lean


def _shape(response: httpx.Response) -> tuple[int, str, bytes]:
    return (
        response.status_code,
        response.headers["content-type"],
        _VARYING.sub(rb'"\1":_', response.content),
    )


async def _both(
    client: httpx.AsyncClient, path: str, content: bytes, headers: dict[str, str]
) -> tuple[tuple[int, str, bytes], tuple[int, str, bytes]]:
    """The same request through the lean handler and through FastAPI's."""
    lean = await client.post(path, content=content, headers=headers)
    full = await client.post(path, content=content, headers=headers, params={"via": "fastapi"})
    return _shape(lean), _shape(full)


ENQUEUES: list[tuple[bytes, dict[str, str]]] = [
    (b'{"type": "t"}', {"content-type": JSON}),
    (b'{"type": "t", "payload": {"n": 1e400, "s": "\\u0000"}}', {"content-type": JSON}),
    (b'{"type": "t", "payload": NaN}', {"content-type": JSON}),
    (b'{"type": "t"}', {"content-type": JSON, "idempotency-key": "k1"}),
    (b'{"type": "t"}', {"content-type": JSON, "idempotency-key": "x" * 300}),
    (b'{"type": "t"}', {"content-type": "application/json; charset=utf-8"}),
    (b'{"type": "t"}', {"content-type": "text/plain"}),
    (b'{"type": "t"}', {}),
    (b"", {"content-type": JSON}),
    (b'{"type": "t",}', {"content-type": JSON}),
    (b"\xff", {"content-type": JSON}),
    (b"[" * 5000 + b"]" * 5000, {"content-type": JSON}),
    (b'{"type": 5, "priority": "high"}', {"content-type": JSON}),
    (b'{"type": "t", "unknown": 1}', {"content-type": JSON}),
    (b"[]", {"content-type": JSON}),
]


@pytest.mark.parametrize(("content", "headers"), ENQUEUES)
async def test_an_enqueue_is_answered_alike(
    client: httpx.AsyncClient, content: bytes, headers: dict[str, str]
) -> None:
    lean, full = await _both(client, "/v1/queues/q/jobs", content, headers)
    if headers.get("idempotency-key") == "k1":  # the second one finds the first's job
        assert (lean[0], full[0]) == (201, 200)
        assert full[2] == lean[2].replace(b'"deduplicated":false', b'"deduplicated":true')
    else:
        assert lean == full


async def test_a_bad_queue_name_is_answered_alike(client: httpx.AsyncClient) -> None:
    lean, full = await _both(
        client, "/v1/queues/has%20space/jobs", b'{"type": "t"}', {"content-type": JSON}
    )
    assert lean == full
    assert lean[0] == 422


COMPLETES: list[tuple[bytes, dict[str, str]]] = [
    (b"", {}),
    (b"{}", {"content-type": JSON}),
    (b'{"result": {"ok": [1, 2.5]}}', {"content-type": JSON}),
    (b"null", {"content-type": JSON}),
    (b'{"result": 1', {"content-type": JSON}),
    (b'{"result": 1}', {"content-type": "text/plain"}),
]


@pytest.mark.parametrize(("content", "headers"), COMPLETES)
async def test_a_complete_is_answered_alike(
    client: httpx.AsyncClient, content: bytes, headers: dict[str, str]
) -> None:
    answers = []
    for query in ({}, {"via": "fastapi"}):
        await enqueue(client, "q")
        token = (await lease_one(client, "q"))["lease_id"]
        path = f"/v1/leases/{token}/complete"
        answers.append(
            _shape(await client.post(path, content=content, headers=headers, params=query))
        )
    assert answers[0] == answers[1]


@pytest.mark.parametrize("token", ["1-" + "0" * 32, "nonsense", "x" * 101])
async def test_a_bad_lease_token_is_answered_alike(client: httpx.AsyncClient, token: str) -> None:
    for action in ("complete", "fail", "heartbeat"):
        body: dict[str, Any] = {"error": {"type": "E", "message": "m"}} if action == "fail" else {}
        lean, full = await _both(
            client, f"/v1/leases/{token}/{action}", httpx.Request("POST", "/", json=body).read(),
            {"content-type": JSON},
        )  # fmt: skip
        assert lean == full
        assert lean[0] in (404, 422)
