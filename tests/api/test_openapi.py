"""The committed OpenAPI document is what the app serves, and it documents errors well."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from app.main import create_app

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op) for path, item in spec["paths"].items() for method, op in item.items()
    ]


def test_committed_spec_matches_the_app() -> None:
    generated = create_app().openapi()
    committed = json.loads(SPEC.read_text())
    assert committed == generated, "openapi/openapi.json is stale: run `make openapi` and commit"


async def test_served_spec_matches_the_app(client: httpx.AsyncClient) -> None:
    served = (await client.get("/openapi.json")).json()
    assert served == json.loads(SPEC.read_text())


def test_every_operation_is_named_and_errors_are_problems() -> None:
    spec = json.loads(SPEC.read_text())
    ids = [op["operationId"] for _, _, op in _operations(spec)]
    assert len(ids) == len(set(ids))
    assert {
        "enqueueJob",
        "enqueueJobs",
        "getJob",
        "listJobs",
        "leaseJobs",
        "heartbeatLease",
        "completeLease",
        "failLease",
        "ackLeases",
        "checkHealth",
    } <= set(ids)
    for path, method, op in _operations(spec):
        assert op.get("summary"), (path, method)
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")):
                assert list(response["content"]) == ["application/problem+json"], (path, status)
    problem = spec["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "code"} <= set(problem["required"])


def test_enqueues_document_429_with_retry_after() -> None:
    spec = json.loads(SPEC.read_text())
    for operation_id in ("enqueueJob", "enqueueJobs"):
        (op,) = [op for _, _, op in _operations(spec) if op["operationId"] == operation_id]
        assert "Retry-After" in op["responses"]["429"]["headers"]
