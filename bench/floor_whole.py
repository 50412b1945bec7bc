"""The framework floor answering as jobq does: whole jobs and fenced lease tokens.

`bench.floor` answers a lease with each job's id and payload (72 bytes a job). jobq's
API answers with the whole job (26 fields, about 850 bytes) and a token whose uuid is
checked when the job is finished. This variant of the floor pays exactly that and
nothing of jobq's own logic: one statement per call on a table shaped like jobq's
(`LIKE jobq.jobs`, with only a primary key and an index of queued jobs), every column
decoded and shaped into jobq's `JobOut`, serialized once. It tells how much of jobq's
distance to the floor is the API's answer itself, which no implementation can drop.

Selected by `JOBQ_BENCH_FLOOR_ANSWER=whole`; it serves the batch enqueue, the drain and
the single-job path (no long-poll).
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

WIDE_TABLE = "bench_wide"
WIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_wide (
    LIKE jobq.jobs INCLUDING DEFAULTS INCLUDING IDENTITY,
    PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS bench_wide_queued_idx ON bench_wide (id) WHERE state = 'queued';
"""
"""jobq's columns, defaults and types; none of its other indexes, checks or triggers."""

INSERT = """
INSERT INTO bench_wide (queue, type, payload, max_attempts, lease_seconds)
VALUES ($1, $2, $3::jsonb, 5, 60)
RETURNING *
"""
INSERT_MANY = """
INSERT INTO bench_wide (queue, type, payload, max_attempts, lease_seconds)
SELECT $1, t, p, 5, 60 FROM unnest($2::text[], $3::jsonb[]) AS u(t, p)
RETURNING id
"""
CLAIM = """
WITH claimed AS (
    SELECT id FROM bench_wide
     WHERE state = 'queued' AND queue = ANY($1::text[])
     ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE bench_wide w
   SET state = 'running', attempt = w.attempt + 1, lease_id = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => w.lease_seconds), worker_id = $3,
       attempted_at = now(), started_at = coalesce(w.started_at, now()), updated_at = now()
 -- by primary key whatever the statistics (jobq's LEASE does the same): a join to
 -- `claimed` planned for an empty table scans the whole table
 WHERE w.id = ANY(ARRAY(SELECT id FROM claimed))
RETURNING w.*
"""
FINISH_ONE = """
UPDATE bench_wide
   SET state = 'succeeded', finished_at = now(), lease_expires_at = NULL,
       result = $3::jsonb, updated_at = now()
 WHERE id = $1 AND lease_id = $2::uuid AND state = 'running'
RETURNING *
"""
FINISH_MANY = """
UPDATE bench_wide w
   SET state = 'succeeded', finished_at = now(), lease_expires_at = NULL,
       result = a.result, updated_at = now()
  FROM unnest($1::bigint[], $2::uuid[], $3::jsonb[]) AS a(id, lease_id, result)
 WHERE w.id = a.id AND w.lease_id = a.lease_id AND w.state = 'running'
RETURNING w.id
"""


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def job(r: asyncpg.Record) -> dict[str, Any]:
    """jobq's `JobOut`, in its order, from a row of the wide table."""
    return {
        "id": r["id"],
        "queue": r["queue"],
        "type": r["type"],
        "state": r["state"],
        "priority": r["priority"],
        "payload": _json(r["payload"]),
        "attempt": r["attempt"],
        "max_attempts": r["max_attempts"],
        "lease_seconds": r["lease_seconds"],
        "run_at": r["run_at"],
        "created_at": r["created_at"],
        "started_at": r["started_at"],
        "finished_at": r["finished_at"],
        "updated_at": r["updated_at"],
        "worker_id": r["worker_id"],
        "lease_expires_at": r["lease_expires_at"],
        "cancel_requested": r["cancel_requested"],
        "progress": None,
        "result": _json(r["result"]),
        "last_error": _json(r["last_error"]),
        "idempotency_key": r["idempotency_key"],
        "metadata": _json(r["metadata"]),
        "waiting_for": r["waiting_for"],
        "on_parent_failure": "run" if r["run_on_parent_failure"] else "cancel",
        "concurrency_key": r["concurrency_key"],
        "attempts": _json(r["attempts"]),
    }


def lease(r: asyncpg.Record) -> dict[str, Any]:
    """jobq's `LeaseOut`: the token is `<job id>-<lease uuid>`."""
    return {
        "lease_id": f"{r['id']}-{r['lease_id'].hex}",
        "expires_at": r["lease_expires_at"],
        "job": job(r),
        "parents": [],
    }


def token(value: str) -> tuple[int, str]:
    """(job id, lease uuid) of a token; asyncpg takes the uuid as text."""
    job_id, _, lease_id = value.partition("-")
    return int(job_id), lease_id


def ack_result(token: str, job_id: int, applied: bool) -> dict[str, Any]:
    """jobq's `AckResult`: 200, or 409 `lease_lost` for a lease no longer live."""
    return {
        "lease_id": token,
        "status": 200 if applied else 409,
        "code": None if applied else "lease_lost",
        "job_id": job_id,
        "state": "succeeded" if applied else None,
    }
