"""One enqueue: the same jobs sent over HTTP and through the SQL functions (`jobq.enqueue`,
`jobq.enqueue_many`) meet the same answers and refusals and leave the same rows, column
by column (each run from empty tables, so even the ids agree)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest

from app.jobs.params import Defaults, EnqueueManyParams, EnqueueOneParams, NewJob
from tests.conftest import EMPTY_TABLES

Job = dict[str, Any]
Step = Job | list[Job]  # one job, or a batch

# The SQL type of each field of a job, as jobq.enqueue takes it.
_SQL_TYPES = {
    "type": "text",
    "payload": "jsonb",
    "priority": "integer",
    "run_at": "timestamptz",
    "delay_seconds": "double precision",
    "max_attempts": "integer",
    "lease_seconds": "integer",
    "idempotency_key": "text",
    "metadata": "jsonb",
    "depends_on": "bigint[]",
    "on_parent_failure": "text",
    "concurrency_key": "text",
    "fairness_key": "text",
    "timeout_seconds": "integer",
    "start_by": "timestamptz",
    "traceparent": "text",
    "tracestate": "text",
}
# `unique`'s options, as jobq.enqueue takes them.
_UNIQUE_SQL_TYPES = {"key": "text", "period": "integer", "states": "text[]", "on_conflict": "text"}
# What each refusal stands for: HTTP's status, the SQL function's SQLSTATE.
_REFUSALS = {"JQ422": 422, "JQ413": 413, "JQ429": 429}

AT = "2031-05-06T07:08:09.123456Z"
YEAR = 31_622_400  # a period neither run crosses the end of
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

# name: (queue settings, steps)
CASES: dict[str, tuple[dict[str, Any], list[Step]]] = {
    "defaults": ({}, [{"type": "t"}]),
    "every field": (
        {},
        [
            {
                "type": "t",
                "payload": {"to": "ada@example.com", "n": [1, 2.5, None, "é"]},
                "priority": 7,
                "max_attempts": 3,
                "lease_seconds": 30,
                "metadata": {"tenant": "acme"},
                "concurrency_key": "customer-1",
                "fairness_key": "tenant-1",
                "on_parent_failure": "run",
            }
        ],
    ),
    "the queue's settings": (
        {"max_attempts": 9, "lease_seconds": 77},
        [{"type": "t"}, {"type": "t", "max_attempts": 2, "lease_seconds": 5}],
    ),
    "timeouts and start deadlines": (
        {"timeout_seconds": 30},
        [
            {"type": "t"},
            {"type": "t", "timeout_seconds": 5, "start_by": AT},
            {"type": "t", "timeout_seconds": 604800},
            {"type": "t", "timeout_seconds": 604801},
            {"type": "t", "timeout_seconds": 0},
            {"type": "t", "start_by": "0001-01-01T00:00:00Z"},
        ],
    ),
    "a batch with timeouts and start deadlines": (
        {"timeout_seconds": 30},
        [
            [{"type": "a"}, {"type": "b", "timeout_seconds": 7, "start_by": AT}],
            [{"type": "c", "timeout_seconds": 0}],
            [
                {"type": "d", "start_by": AT},
                {"type": "e", "depends_on": [{"ref": 0}], "timeout_seconds": 9},
            ],
        ],
    ),
    "priorities": (
        {},
        [
            {"type": "t", "priority": -32768},
            {"type": "t", "priority": 32767},
            {"type": "t", "priority": 32768},
        ],
    ),
    "run_at": (
        {},
        [
            {"type": "t", "run_at": AT},
            {"type": "t", "delay_seconds": 90.5},
            {"type": "t", "run_at": AT, "delay_seconds": 1},
        ],
    ),
    "an idempotency key held": (
        {},
        [
            {"type": "t", "idempotency_key": "k"},
            {"type": "other", "idempotency_key": "k", "priority": 5},
        ],
    ),
    "a full queue": (
        {"max_backlog": 2},
        [
            {"type": "t"},
            {"type": "t", "idempotency_key": "k"},
            {"type": "t"},
            {"type": "t", "idempotency_key": "k"},  # a replay is answered, full or not
        ],
    ),
    "key lengths": (
        {},
        [
            {"type": "t", "idempotency_key": "k" * 255},
            {"type": "t", "idempotency_key": "x" * 256},
            {"type": "t", "concurrency_key": "c" * 255},
            {"type": "t", "concurrency_key": "c" * 256},
            {"type": "t", "fairness_key": "f" * 255},
            {"type": "t", "fairness_key": "f" * 256},
            {"type": "n" * 128},
            {"type": "n" * 129},
        ],
    ),
    "sizes and ranges": (
        {},
        [
            {"type": "t", "payload": "x" * 60_000, "metadata": {"m": "y" * 60_000}},
            {"type": "t", "payload": "x" * 300_000},
            {"type": "t", "max_attempts": 0},
            {"type": "t", "lease_seconds": 10**6},
            {"type": "t", "delay_seconds": -1},
        ],
    ),
    "dependencies": (
        {},
        [
            {"type": "parent"},
            {"type": "child", "depends_on": [1]},
            {"type": "runs anyway", "depends_on": [1, 2], "on_parent_failure": "run"},
            {"type": "orphan", "depends_on": [99]},
        ],
    ),
    "a fair queue": (  # a job without a key gets the key ''
        {"ordering": "fair"},
        [
            {"type": "t"},
            {"type": "t", "fairness_key": "A"},
            [{"type": "a", "fairness_key": "B"}, {"type": "b"}],
            {"type": "child", "depends_on": [1], "fairness_key": "C"},
            [{"type": "c", "depends_on": [{"ref": 0}, 1]}, {"type": "d", "fairness_key": "D"}],
        ],
    ),
    "a batch": (
        {"max_attempts": 4},
        [
            [
                {"type": "a", "idempotency_key": "k"},
                {"type": "b", "idempotency_key": "k"},
                {"type": "c", "priority": 3, "run_at": AT},
                {"type": "d", "delay_seconds": 10, "lease_seconds": 9},
            ],
            [{"type": "e", "idempotency_key": "k"}, {"type": "f"}],
        ],
    ),
    "a batch into a full queue": (
        {"max_backlog": 3},
        [
            [{"type": "a"}, {"type": "b"}],
            # one new job: a key named twice is one job
            [{"type": "c", "idempotency_key": "k"}, {"type": "d", "idempotency_key": "k"}],
            [{"type": "e"}],
            [{"type": "f", "idempotency_key": "k"}],
        ],
    ),
    "uniqueness": (
        {},
        [
            {"type": "t", "unique": {"key": "u"}},
            {"type": "t", "payload": 2, "unique": {"key": "u"}},  # answered by the first
            {"type": "other", "unique": {"key": "u"}},  # another type: a job of its own
            {"type": "t", "unique": {"key": "u", "period": YEAR}},  # a period: a job of its own
            {"type": "t", "unique": {"key": "u", "period": YEAR}, "idempotency_key": "k"},
            {"type": "t", "idempotency_key": "k", "unique": {"key": "u", "on_conflict": "replace"}},
            {
                "type": "t",
                "payload": "last",
                "run_at": AT,
                "unique": {"key": "u", "on_conflict": "replace"},
            },
            {"type": "t", "unique": {"key": "s", "states": ["waiting", "queued", "running"]}},
            {"type": "t", "unique": {"key": ""}},
            {"type": "t", "unique": {"key": "x" * 256}},
            {"type": "t", "unique": {"key": "s", "states": ["queued", "running"]}},
            {"type": "t", "unique": {"key": "s", "period": 0}},
            {"type": "t", "unique": {"key": "s", "on_conflict": "update"}},
        ],
    ),
    "uniqueness in a full queue": (
        {"max_backlog": 2},
        [
            {"type": "t", "unique": {"key": "a"}},
            {"type": "t"},
            {"type": "t", "unique": {"key": "a", "on_conflict": "replace"}, "run_at": AT},
            {"type": "t", "unique": {"key": "b"}},
            # a batch that makes no job fits; one that makes one does not
            [{"type": "t", "unique": {"key": "a"}}, {"type": "t", "unique": {"key": "a"}}],
            [{"type": "t", "unique": {"key": "a"}}, {"type": "t", "unique": {"key": "b"}}],
        ],
    ),
    "a batch with uniqueness": (
        {},
        [
            [
                {"type": "t", "unique": {"key": "a"}},
                {"type": "t", "payload": 1, "unique": {"key": "a", "on_conflict": "replace"}},
                {"type": "t", "unique": {"key": "b"}, "idempotency_key": "k"},
                {"type": "t"},
            ],
            [{"type": "t", "unique": {"key": "b"}}, {"type": "u", "unique": {"key": "b"}}],
            [{"type": "t", "unique": {"key": "c", "states": ["queued"]}}],
        ],
    ),
    "uniqueness with dependencies": (
        {},
        [
            {"type": "parent"},
            {"type": "child", "depends_on": [1], "unique": {"key": "c"}},
            {"type": "child", "depends_on": [1], "unique": {"key": "c"}},
            [{"type": "child", "depends_on": [1], "unique": {"key": "c"}}],
            # a waiting job holding it is answered as it is, `replace` or not
            [
                {"type": "child", "depends_on": [1], "unique": {"key": "d"}},
                {
                    "type": "child",
                    "depends_on": [{"ref": 0}],
                    "unique": {"key": "d", "on_conflict": "replace"},
                },
            ],
        ],
    ),
    "trace contexts": (
        {},
        [
            {"type": "t", "trace": {"traceparent": TRACEPARENT, "tracestate": "a=1, b@c=x y"}},
            {"type": "t", "trace": {"traceparent": TRACEPARENT}},
            {"type": "t", "trace": {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}},
            {"type": "t", "trace": {"traceparent": TRACEPARENT, "tracestate": "A=1"}},
            [
                {"type": "a", "trace": {"traceparent": TRACEPARENT, "tracestate": "k=v"}},
                {"type": "b"},
            ],
            [{"type": "c", "trace": {"traceparent": TRACEPARENT.upper()}}],
            [
                {"type": "d", "trace": {"traceparent": TRACEPARENT}},
                {"type": "e", "depends_on": [{"ref": 0}], "trace": {"traceparent": TRACEPARENT}},
            ],
        ],
    ),
    "a batch with dependencies": (
        {},
        [
            {"type": "parent"},
            [
                {"type": "a", "depends_on": [1]},
                {"type": "b", "depends_on": [{"ref": 0}, 1]},
                {"type": "c"},
            ],
        ],
    ),
}

# Every column, times as offsets from the job's creation (each run has its own clock),
# but a run_at the job gave as it is.
ROWS = f"""
SELECT j.*,
       CASE WHEN j.run_at = '{AT}' THEN 'as given'
            ELSE (j.run_at - j.created_at)::text END AS run_after,
       j.finished_at - j.created_at AS finished_after
  FROM jobq.jobs j
 ORDER BY j.id
"""
_CLOCKS = ("created_at", "updated_at", "run_at", "finished_at")
EDGES = "SELECT * FROM jobq.job_dependencies ORDER BY child_id, parent_id"


async def _over_http(client: httpx.AsyncClient, queue: str, step: Step) -> Any:
    if isinstance(step, list):
        response = await client.post(f"/v1/queues/{queue}/jobs/batch", json={"jobs": step})
        if response.status_code == 201:
            return [_answer(job) for job in response.json()["jobs"]]
    else:
        response = await client.post(f"/v1/queues/{queue}/jobs", json=step)
        if response.status_code in (200, 201):
            assert response.json()["deduplicated"] == (response.status_code == 200)
            return _answer(response.json())
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.status_code


def _answer(job: Any) -> bool | str:
    """Whether another job held the key or uniqueness; "replaced" if it was replaced."""
    return "replaced" if job["replaced"] else bool(job["deduplicated"])


def _sql_value(name: str, value: Any) -> Any:
    if _SQL_TYPES.get(name) == "jsonb":
        return json.dumps(value)
    if name in ("run_at", "start_by"):
        return datetime.fromisoformat(value)
    return value


async def _through_sql(db: asyncpg.Connection, queue: str, step: Step) -> Any:
    try:
        if isinstance(step, list):
            rows = await db.fetch(
                "SELECT * FROM jobq.enqueue_many($1, $2::jsonb)", queue, json.dumps(step)
            )
            return [_answer(row) for row in rows]
        fields = {k: v for k, v in step.items() if k not in ("unique", "trace")}
        fields.update({f"unique_{k}": v for k, v in step.get("unique", {}).items()})
        fields.update(step.get("trace", {}))
        types = {**_SQL_TYPES, **{f"unique_{k}": t for k, t in _UNIQUE_SQL_TYPES.items()}}
        named = [f"{name} => ${i}::{types[name]}" for i, name in enumerate(fields, start=2)]
        args = [_sql_value(name, value) for name, value in fields.items()]
        row = await db.fetchrow(f"SELECT * FROM jobq.enqueue($1, {', '.join(named)})", queue, *args)
        assert row is not None
        return _answer(row)
    except asyncpg.PostgresError as error:
        return _REFUSALS[error.sqlstate]


async def _state(db: asyncpg.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    jobs = [{k: v for k, v in row.items() if k not in _CLOCKS} for row in await db.fetch(ROWS)]
    return jobs, [dict(row) for row in await db.fetch(EDGES)]


async def _fresh(db: asyncpg.Connection, queue: str, settings: dict[str, Any]) -> None:
    await db.execute(EMPTY_TABLES)
    if settings:
        columns = ", ".join(settings)
        values = ", ".join(f"${i}" for i in range(2, len(settings) + 2))
        await db.execute(
            f"INSERT INTO jobq.queues (name, {columns}) VALUES ($1, {values})",
            queue,
            *settings.values(),
        )


@pytest.mark.parametrize("case", list(CASES))
async def test_http_and_sql_enqueue_make_the_same_rows(
    client: httpx.AsyncClient, db: asyncpg.Connection, case: str
) -> None:
    settings, steps = CASES[case]
    queue = "parity"
    await _fresh(db, queue, settings)
    http = [await _over_http(client, queue, step) for step in steps]
    http_rows = await _state(db)

    await _fresh(db, queue, settings)
    sql = [await _through_sql(db, queue, step) for step in steps]
    sql_rows = await _state(db)

    assert http == sql
    assert http_rows[0], "the case made no job"
    for made_over_http, made_in_sql in zip(http_rows[0], sql_rows[0], strict=True):
        assert made_over_http == made_in_sql
    assert http_rows[1] == sql_rows[1]
    assert len(http_rows[0]) == len(sql_rows[0])


async def test_the_cases_meet_every_answer(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    """Between them the cases make jobs, answer held keys, and meet each refusal."""
    answers: set[Any] = set()
    for number, (settings, steps) in enumerate(CASES.values()):
        queue = f"case-{number}"
        await _fresh(db, queue, settings)
        for step in steps:
            answer = await _over_http(client, queue, step)
            answers.update(answer if isinstance(answer, list) else [answer])
    assert answers == {False, True, "replaced", 413, 422, 429}


# The batch statement's column for each of a job's fields.
BATCH_COLUMN_OF = {
    "type": "types", "payload": "payloads", "priority": "priorities", "run_at": "run_ats",
    "delay_seconds": "delays", "max_attempts": "max_attempts",
    "lease_seconds": "lease_seconds", "idempotency_key": "idempotency_keys",
    "metadata": "metadatas", "concurrency_key": "concurrency_keys",
    "runs_on_parent_failure": "runs_on_parent_failure", "fairness_key": "fairness_keys",
    "unique": "uniques",
    "timeout_seconds": "timeouts", "start_by": "start_bys",
    "traceparent": "traceparents", "tracestate": "tracestates",
}  # fmt: skip


def test_the_statements_parameters_are_the_queue_a_new_job_and_the_defaults() -> None:
    """The repository builds them by position: `(queue, *job, *defaults)`."""
    job, defaults = NewJob._fields, Defaults._fields
    assert EnqueueOneParams._fields == ("queue", *job, *defaults)
    columns = tuple(BATCH_COLUMN_OF[field] for field in job)
    assert EnqueueManyParams._fields == ("queue", *columns, *defaults)
