"""Schemathesis fuzzes every operation of the committed OpenAPI document against the app.

Bounded and repeatable: a fixed seed, deterministic generation, a few dozen examples per
operation besides the boundary cases of the coverage phase (set `JOBQ_FUZZ_EXAMPLES`
for a longer run). Each operation gets a fresh app on the emptied test database, where
an admin key exists, so the app requires keys as the spec says: requests carry that
key, except those generated with broken headers, which must be refused. The
checks: no 5xx; every status, content type, header and body is the one the spec
documents; schema-violating requests are refused; every error is problem+json.
Timestamps include the edges of what Python, asyncpg and PostgreSQL can hold.

Not checked: "schema-valid data is accepted". The API has rules a JSON Schema cannot
state (`run_at` or `delay_seconds`, not both; the `Idempotency-Key` header and body key
must agree; no NUL in text), and it refuses those requests with 422, as documented.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from app.api.problems import PROBLEM_MEDIA_TYPE
from app.jobs.schemas import MAX_WAIT_SECONDS
from tests.conftest import plain
from tests.helpers import create_key

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
EXAMPLES_PER_OPERATION = int(os.environ.get("JOBQ_FUZZ_EXAMPLES", "25"))
FAST_WAIT_SECONDS = 0.1  # a valid long poll still waits, but not for up to 30 s

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 20261123,
        "generation": {
            "max-examples": EXAMPLES_PER_OPERATION,
            "deterministic": True,
            "database": "none",
        },
    }
)
# Timestamps: Hypothesis' own RFC 3339 values, and the edges of what Python, asyncpg and
# PostgreSQL can hold (the +14:00 and -14:00 offsets carry a year past them in UTC).
EDGE_TIMES = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999999Z",
    "1970-01-01T00:00:00Z",
    "9999-12-30T23:59:59.999999Z",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59.999999Z",
]
OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14)), timezone.max]
)
schemathesis.openapi.format(
    "date-time",
    st.one_of(
        st.sampled_from(EDGE_TIMES),
        st.datetimes(timezones=OFFSETS, allow_imaginary=False).map(datetime.isoformat),
    ),
)
schema = schemathesis.openapi.from_path(SPEC, config=CONFIG)


def errors_are_problems(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """Every 4xx and 5xx is application/problem+json with its status and a `code`."""
    del ctx, case
    if response.status_code < 400:
        return None
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith(PROBLEM_MEDIA_TYPE), content_type
    body = response.json()
    assert body["status"] == response.status_code, body
    assert isinstance(body["code"], str) and body["code"], body
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    allow_header_conformance,
    unsupported_method,
    errors_are_problems,
]


async def drop_keys(database_url: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def admin_key(database_url: str) -> Iterator[str]:
    """An admin key: the app requires keys, as the spec says, and this one may do anything."""
    key = asyncio.run(create_key(database_url, "fuzz", ["admin"]))
    yield key
    asyncio.run(drop_keys(database_url))


@pytest.fixture
def fuzzed_app(app_factory: Callable[..., FastAPI], admin_key: str) -> Iterator[FastAPI]:
    """An app on the emptied test database; Schemathesis runs its lifespan, stopped here."""
    del admin_key  # exists, so every request needs a key
    # an accepted event stream ends at once: the in-process transport reads answers whole
    yield app_factory(event_stream_seconds=0.05)
    asgi.shutdown_lifespans()


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one app per operation
def test_the_api_honours_its_spec(case: Case[Any], fuzzed_app: FastAPI, admin_key: str) -> None:
    body: Any = case.body
    # a lease's long poll, alone or after acks (`POST /v1/acks`'s `lease`)
    asks: tuple[Any, ...] = (body, body.get("lease")) if isinstance(body, dict) else ()
    for asked in asks:
        wait: Any = asked.get("wait_seconds") if isinstance(asked, dict) else None
        if type(wait) in (int, float) and 0 <= wait <= MAX_WAIT_SECONDS:
            asked["wait_seconds"] = min(wait, FAST_WAIT_SECONDS)  # invalid stays invalid
    # The admin key goes with every request but those generated to break the headers:
    # those (a missing or bogus `Authorization`) must be refused, with 401.
    header = case.meta.components.get(ParameterLocation.HEADER) if case.meta else None
    broken = header is not None and header.mode is GenerationMode.NEGATIVE
    headers = {} if broken else {"Authorization": f"Bearer {admin_key}"}
    case.call_and_validate(checks=CHECKS, app=fuzzed_app, headers=headers)
