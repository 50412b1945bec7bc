"""The committed OpenAPI document is pleasant to generate clients from: it is a valid
OpenAPI 3.1 document, operations are named for their action, every error a call may
answer is documented as a problem, and the main schemas carry examples that are valid.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate
from pydantic import BaseModel

from app.api.schemas import Problem
from app.jobs import schemas

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
PROBLEM_REF = "#/components/schemas/Problem"
# camelCase, starting with what the call does.
VERBS = (
    "ack", "cancel", "check", "complete", "create", "delete", "enqueue", "explain", "fail",
    "follow", "get", "heartbeat", "lease", "list", "pause", "purge", "quiet", "redrive",
    "release", "report", "reset", "resume", "retry", "revoke", "set", "snooze", "update",
)  # fmt: skip
OPERATION_ID = re.compile(rf"^(?:{'|'.join(VERBS)})(?:[A-Z][a-z0-9]*)*$")
EXAMPLED = [
    schemas.JobIn,
    schemas.BatchIn,
    schemas.LeaseIn,
    schemas.HeartbeatIn,
    schemas.CompleteIn,
    schemas.SnoozeIn,
    schemas.FailIn,
    schemas.AcksIn,
    schemas.JobOut,
    schemas.EnqueuedJob,
    schemas.DeduplicatedBrief,
    schemas.LeaseOut,
    Problem,
]


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SPEC.read_text())
    return document


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op) for path, item in spec["paths"].items() for method, op in item.items()
    ]


def test_the_document_is_valid_openapi(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1")
    validate(spec)


def test_operation_ids_are_verbs(spec: dict[str, Any]) -> None:
    ids = {op["operationId"]: (method, path) for path, method, op in _operations(spec)}
    assert {"enqueueJob", "leaseJobs", "heartbeatLease", "completeLease", "ackLeases"} <= set(ids)
    assert [i for i in ids if not OPERATION_ID.match(i)] == []


def test_every_error_a_call_may_answer_is_a_documented_problem(spec: dict[str, Any]) -> None:
    for path, method, op in _operations(spec):
        responses = op["responses"]
        expected = set()
        if "requestBody" in op:
            expected |= {"400", "413", "415", "422"}
        if path.startswith("/v1/"):
            expected |= {"503"}
        assert expected <= set(responses), (method, path, sorted(expected - set(responses)))
        for status, response in responses.items():
            if status[0] in "45":
                content = response["content"]["application/problem+json"]
                assert content["schema"] == {"$ref": PROBLEM_REF}, (method, path, status)
                assert response["description"], (method, path, status)


@pytest.mark.parametrize("model", EXAMPLED, ids=lambda m: m.__name__)
def test_main_schemas_have_valid_examples(spec: dict[str, Any], model: type[BaseModel]) -> None:
    documented = spec["components"]["schemas"][model.__name__]
    examples = documented.get("examples")
    assert examples, f"{model.__name__} has no example in the document"
    for example in examples:
        model.model_validate(example)  # the example is something the API accepts or sends
