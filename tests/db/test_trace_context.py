"""The SQL enqueue functions store a job's W3C trace context, and refuse a malformed
one by the rules the API applies (`app.core.tracecontext`, `jobq.check_trace`)."""

from __future__ import annotations

import json

import asyncpg
import pytest

from app.core import tracecontext

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

TRACEPARENTS = [
    TRACEPARENT,
    "01" + TRACEPARENT[2:],
    "cc" + TRACEPARENT[2:] + "-more-fields",
    "cc" + TRACEPARENT[2:] + "-",
    TRACEPARENT.upper(),
    "ff" + TRACEPARENT[2:],
    TRACEPARENT + "-more",
    TRACEPARENT[:-1],
    "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
    "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
    "cc" + TRACEPARENT[2:] + "-with space",
    "",
    "cc" + TRACEPARENT[2:] + "-" + "x" * 500,
]
TRACESTATES = [
    "k=v",
    "a=1,b=2",
    " a=1 ,\tb=2 , ",
    ",,a=1,,",
    "tenant@system=value with spaces",
    "0tenant@sys=1",
    "a*b/c-d_e=~!",
    ",".join(f"k{i}=v" for i in range(32)),
    ",".join(f"k{i}=v" for i in range(33)),
    "",
    " , ",
    "Upper=1",
    "0digit=1",
    "k=",
    "k=trailing ",
    "k=a,b",
    "k=a=b",
    "=v",
    "k=é",
    "tenant@Sys=1",
    "k" * 256 + "=v",
    "k" * 257 + "=v",
    "k=" + "v" * 256,
    "k=" + "v" * 257,
]


async def _sql_allows(db: asyncpg.Connection, traceparent: str, tracestate: str | None) -> bool:
    try:
        await db.execute("SELECT jobq.check_trace($1, $2, '')", traceparent, tracestate)
    except asyncpg.PostgresError as error:
        assert error.sqlstate == "JQ422"
        return False
    return True


@pytest.mark.parametrize("traceparent", TRACEPARENTS)
async def test_sql_and_the_api_agree_on_each_traceparent(
    db: asyncpg.Connection, traceparent: str
) -> None:
    allowed = tracecontext.valid_traceparent(traceparent)
    assert await _sql_allows(db, traceparent, None) == allowed


@pytest.mark.parametrize("tracestate", TRACESTATES)
async def test_sql_and_the_api_agree_on_each_tracestate(
    db: asyncpg.Connection, tracestate: str
) -> None:
    allowed = tracecontext.valid_tracestate(tracestate)
    assert await _sql_allows(db, TRACEPARENT, tracestate) == allowed


def test_the_examples_hold_both_kinds() -> None:
    parents = [tracecontext.valid_traceparent(t) for t in TRACEPARENTS]
    states = [tracecontext.valid_tracestate(t) for t in TRACESTATES]
    assert parents.count(True) == 4 and states.count(True) == 11


async def test_the_sql_functions_store_the_trace_context(db: asyncpg.Connection) -> None:
    job_id = await db.fetchval(
        "SELECT id FROM jobq.enqueue('sql', 't', traceparent => $1, tracestate => 'k=v')",
        TRACEPARENT,
    )
    items = [{"type": "a", "trace": {"traceparent": TRACEPARENT}}, {"type": "b"}]
    rows = await db.fetch("SELECT id FROM jobq.enqueue_many('sql', $1::jsonb)", json.dumps(items))
    stored = await db.fetch(
        "SELECT traceparent, tracestate FROM jobq.jobs WHERE id = ANY($1::bigint[]) ORDER BY id",
        [job_id, *(row["id"] for row in rows)],
    )
    assert [tuple(row) for row in stored] == [
        (TRACEPARENT, "k=v"),
        (TRACEPARENT, None),
        (None, None),
    ]


@pytest.mark.parametrize(
    ("trace", "field"),
    [
        ("garbage", "jobs.0.trace"),
        ({"traceparent": 1}, "jobs.0.trace"),
        ({"traceparent": TRACEPARENT, "baggage": "x"}, "jobs.0.trace"),
        ({"traceparent": TRACEPARENT, "tracestate": 5}, "jobs.0.trace"),
        ({"traceparent": "garbage"}, "jobs.0.trace.traceparent"),
        ({"traceparent": TRACEPARENT, "tracestate": "Bad"}, "jobs.0.trace.tracestate"),
    ],
)
async def test_a_batch_items_malformed_trace_is_refused(
    db: asyncpg.Connection, trace: object, field: str
) -> None:
    items = json.dumps([{"type": "a", "trace": trace}])
    with pytest.raises(asyncpg.PostgresError) as refused:
        await db.execute("SELECT jobq.enqueue_many('sql', $1::jsonb)", items)
    assert refused.value.sqlstate == "JQ422"
    assert refused.value.detail == field
    # and so through the dependencies' path, item by item
    items = json.dumps([{"type": "p"}, {"type": "a", "depends_on": [{"ref": 0}], "trace": trace}])
    with pytest.raises(asyncpg.PostgresError) as refused:
        await db.execute("SELECT jobq.enqueue_many('sql', $1::jsonb)", items)
    assert refused.value.sqlstate == "JQ422"


async def test_a_tracestate_needs_a_traceparent(db: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.PostgresError) as refused:
        await db.execute("SELECT jobq.enqueue('sql', 't', tracestate => 'k=v')")
    assert (refused.value.sqlstate, refused.value.detail) == ("JQ422", "tracestate")
