"""The complete-only statements (complete_one, complete_many) leave a job exactly as
finish_one and finish_many leave it when they complete it, and answer the same."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from app.jobs import repository as jobs_sql
from tests.statements import args_of

# what differs between two jobs finished alike: who they are and when
_OWN = {"id", "lease_id", "created_at", "finished_at", "updated_at"}
_BACKOFF = {"backoff_base": 10.0, "backoff_cap": 60.0, "backoff_jitter": 0.1}


async def _running(
    db: asyncpg.Connection, count: int, cancel_requested: bool = False
) -> list[asyncpg.Record]:
    """`count` running jobs alike, with a lease held by key 7."""
    rows: list[asyncpg.Record] = await db.fetch(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               lease_id, lease_expires_at, current_lease_seconds,
                               attempt, run_at, attempted_at, started_at, worker_id,
                               lease_key_id, last_error, cancel_requested, progress_percent)
        SELECT 'q', 't', '{"n": 1}', 'running', 5, 60, gen_random_uuid(),
               now() + interval '1 min', 60, 2, '2026-01-01', '2026-01-03', '2026-01-02', 'w', 7,
               '{"type": "boom", "message": "first try"}', $2, 40
          FROM generate_series(1, $1)
        RETURNING id, lease_id
        """,
        count,
        cancel_requested,
    )
    return rows


def _lease(job: asyncpg.Record) -> dict[str, Any]:
    return {"job_id": job["id"], "lease_id": job["lease_id"]}


def _alike(row: asyncpg.Record) -> dict[str, Any]:
    return {k: v for k, v in dict(row).items() if k not in _OWN}


async def _whole(db: asyncpg.Connection, job_id: int) -> asyncpg.Record:
    row = await db.fetchrow("SELECT * FROM jobq.jobs WHERE id = $1", job_id)
    assert row is not None
    return row


@pytest.mark.parametrize("cancel_requested", [False, True])
async def test_complete_one_leaves_the_job_as_finish_one_does(
    db: asyncpg.Connection, cancel_requested: bool
) -> None:
    general, alone = await _running(db, 2, cancel_requested=cancel_requested)
    params = {"outcome": "complete", "result": '{"ok": true}', "error": None,
              "retryable": True, "retry_after": None, "key_id": 7, **_BACKOFF}  # fmt: skip
    (finished,) = await db.fetch(
        jobs_sql.FINISH_ONE.sql, *args_of(jobs_sql.FINISH_ONE, {**params, **_lease(general)})
    )
    (completed,) = await db.fetch(
        jobs_sql.COMPLETE_ONE.sql, *args_of(jobs_sql.COMPLETE_ONE, {**params, **_lease(alone)})
    )
    assert completed["state"] == "succeeded"
    assert completed["result"] == '{"ok": true}'
    # the same answer (the job's columns, in order) and the same row stored
    assert list(completed.keys()) == list(finished.keys())[: len(completed)]
    assert _alike(completed) == {k: v for k, v in _alike(finished).items() if k != "announced"}
    assert _alike(await _whole(db, alone["id"])) == _alike(await _whole(db, general["id"]))


async def test_complete_many_answers_and_leaves_jobs_as_finish_many_does(
    db: asyncpg.Connection,
) -> None:
    general, alone = await _running(db, 3), await _running(db, 3)
    stale = {"id": general[0]["id"], "lease_id": alone[0]["lease_id"]}  # another's lease

    def columns(rows: list[Any]) -> dict[str, Any]:
        n = len(rows)
        return {"job_ids": [r["id"] for r in rows], "lease_ids": [r["lease_id"] for r in rows],
                "outcomes": ["complete"] * n, "results": ['{"i": 1}', None, "[2]", None][:n],
                "errors": [None] * n, "retryable": [True] * n, "retry_after": [None] * n,
                "key_id": 7, **_BACKOFF}  # fmt: skip

    finished = await db.fetch(
        jobs_sql.FINISH_MANY.sql, *args_of(jobs_sql.FINISH_MANY, columns([stale, *general]))
    )
    completed = await db.fetch(
        jobs_sql.COMPLETE_MANY.sql, *args_of(jobs_sql.COMPLETE_MANY, columns([stale, *alone]))
    )
    assert [r["ord"] for r in completed] == [r["ord"] for r in finished] == [2, 3, 4]
    assert list(completed[0].keys()) == list(finished[0].keys())
    assert [_alike(r) for r in completed] == [_alike(r) for r in finished]
    for a, b in zip(alone, general, strict=True):
        assert _alike(await _whole(db, a["id"])) == _alike(await _whole(db, b["id"]))


async def test_complete_statements_refuse_another_keys_lease(db: asyncpg.Connection) -> None:
    (job,) = await _running(db, 1)
    one = {"job_id": job["id"], "lease_id": job["lease_id"], "result": None, "key_id": 8}
    assert await db.fetch(jobs_sql.COMPLETE_ONE.sql, *args_of(jobs_sql.COMPLETE_ONE, one)) == []
    many = {"job_ids": [job["id"]], "lease_ids": [job["lease_id"]], "results": [None],
            "key_id": 8}  # fmt: skip
    assert await db.fetch(jobs_sql.COMPLETE_MANY.sql, *args_of(jobs_sql.COMPLETE_MANY, many)) == []
    assert (await _whole(db, job["id"]))["state"] == "running"
