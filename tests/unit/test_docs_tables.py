"""The request bodies' field tables of docs/api/*.md are generated from the committed
OpenAPI document (`make docs-tables`): a field added, renamed, bounded or described
differently in the schemas shows up there, or this fails."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.docs_tables import API_PAGES, OPENAPI, REPO, field_table, field_tables, with_field_tables

# Each request body with a field table, and the page that holds it.
TABLES = {
    "JobIn": "jobs.md",
    "LeaseIn": "jobs.md",
    "HeartbeatIn": "jobs.md",
    "FailIn": "jobs.md",
    "SnoozeIn": "jobs.md",
    "PresenceIn": "jobs.md",
    "RetryIn": "operators.md",
    "RedriveIn": "operators.md",
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OPENAPI.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("page", API_PAGES, ids=lambda p: p.name)
def test_the_field_tables_are_the_openapi_documents(page: Any, spec: dict[str, Any]) -> None:
    text = page.read_text(encoding="utf-8")
    assert text == with_field_tables(text, spec), (
        f"{page.relative_to(REPO)}'s field tables fell behind openapi/openapi.json: "
        "run `make docs-tables`"
    )


def test_each_request_body_has_its_table(spec: dict[str, Any]) -> None:
    found = {
        name: page.name for page in API_PAGES for name in field_tables(page.read_text("utf-8"))
    }
    assert found == TABLES
    enqueue = field_table(spec, "JobIn")
    for field in spec["components"]["schemas"]["JobIn"]["properties"]:
        assert f"| `{field}` |" in enqueue
    assert "| `concurrency_key` | `null` | 1..255 characters; jobs with the same key" in enqueue


def test_a_table_says_defaults_bounds_and_nested_fields(spec: dict[str, Any]) -> None:
    """What the generator reads from a schema (the check above can fail)."""
    lease = field_table(spec, "LeaseIn").splitlines()
    assert lease[:2] == ["| Field | Default | Bounds and meaning |", "| --- | --- | --- |"]
    assert "| `queues` | required | 1..100 names; queue names to lease from |" in lease
    assert "| `max_jobs` | `1` | integer 1..100; jobs to lease at most |" in lease
    fail = field_table(spec, "FailIn")
    assert "| `error.type` | required | 1..255 characters; what failed" in fail
    assert "| `retryable` | `true` | `false` fails the job for good |" in fail
    enqueue = field_table(spec, "JobIn")
    assert "| `max_attempts` | the queue's `max_attempts` setting, else `5`" in enqueue
    assert '| `on_parent_failure` | `"cancel"` | `cancel` or `run`; when a parent' in enqueue
    stale = "<!-- fields:LeaseIn:begin -->\n| `queues` | old |\n<!-- fields:LeaseIn:end -->\n"
    assert with_field_tables(stale, spec) != stale
