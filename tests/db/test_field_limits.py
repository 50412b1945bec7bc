"""A job's field limits are written once, in Python (`app.core.fields`, `app.core.names`,
`app.core.timestamps`); the SQL enqueue functions check them again in `jobq.check_job`
(migration 0023), written into its SQL. Both are held to the one source here: each field
at its bound is accepted, and just past it refused, naming the field, by the API's
schema and by `jobq.enqueue`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
from pydantic import ValidationError

from app.core import timestamps
from app.core.fields import (
    MAX_ATTEMPTS_LIMIT,
    MAX_DELAY_SECONDS,
    MAX_PRIORITY,
    MAX_TEXT_LENGTH,
    MIN_PRIORITY,
)
from app.core.names import MAX_NAME_LENGTH
from app.jobs.schemas import JobIn

MICROSECOND = timedelta(microseconds=1)

# (field, at its bound, just past it)
BOUNDS: list[tuple[str, Any, Any]] = [
    ("type", "t" * MAX_NAME_LENGTH, "t" * (MAX_NAME_LENGTH + 1)),
    ("idempotency_key", "k" * MAX_TEXT_LENGTH, "k" * (MAX_TEXT_LENGTH + 1)),
    ("concurrency_key", "c" * MAX_TEXT_LENGTH, "c" * (MAX_TEXT_LENGTH + 1)),
    ("fairness_key", "f" * MAX_TEXT_LENGTH, "f" * (MAX_TEXT_LENGTH + 1)),
    ("priority", MAX_PRIORITY, MAX_PRIORITY + 1),
    ("priority", MIN_PRIORITY, MIN_PRIORITY - 1),
    ("max_attempts", MAX_ATTEMPTS_LIMIT, MAX_ATTEMPTS_LIMIT + 1),
    ("delay_seconds", float(MAX_DELAY_SECONDS), MAX_DELAY_SECONDS + 0.5),
    ("run_at", timestamps.LATEST, timestamps.LATEST + MICROSECOND),
    ("run_at", timestamps.EARLIEST, timestamps.EARLIEST - MICROSECOND),
]
IDS = [f"{field}={'long' if isinstance(at, str) else at}" for field, at, _ in BOUNDS]


def _api_refuses(field: str, value: Any) -> bool:
    """Does the API's schema refuse a job with `value` in `field` (naming it)?"""
    job = {"type": "t", field: value.isoformat() if isinstance(value, datetime) else value}
    try:
        JobIn.model_validate_json(json.dumps(job))
    except ValidationError as exc:
        assert [error["loc"][0] for error in exc.errors()] == [field]
        return True
    return False


async def _sql_refuses(db: asyncpg.Connection, field: str, value: Any) -> bool:
    """Does `jobq.enqueue` refuse a job with `value` in `field` (naming it)?"""
    args = {"queue": "limits", "type": "t", field: value}
    named = ", ".join(f"{name} => ${i}" for i, name in enumerate(args, 1))
    try:
        async with db.transaction():
            await db.fetch(f"SELECT id FROM jobq.enqueue({named})", *args.values())
    except asyncpg.PostgresError as exc:
        assert (exc.sqlstate, exc.detail) == ("JQ422", field), exc
        return True
    return False


@pytest.mark.parametrize(("field", "at", "past"), BOUNDS, ids=IDS)
async def test_the_api_and_the_sql_function_hold_a_field_to_one_bound(
    db: asyncpg.Connection, field: str, at: Any, past: Any
) -> None:
    assert (_api_refuses(field, at), _api_refuses(field, past)) == (False, True)
    assert (await _sql_refuses(db, field, at), await _sql_refuses(db, field, past)) == (
        False,
        True,
    )
