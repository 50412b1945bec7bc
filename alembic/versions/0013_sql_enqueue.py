"""Enqueueing from SQL, inside the producer's own transaction.

- `jobq.enqueue(...)` and `jobq.enqueue_many(queue, jobs)` enqueue with the HTTP
  enqueue's defaults (the queue's own where its settings have them), limits,
  idempotency, admission control, dependencies and wake-up; the HTTP enqueue uses them
  for jobs with dependencies. A refusal raises SQLSTATE JQ422, JQ413 or JQ429 with the
  field in DETAIL.
- `jobq.enqueue_limits` holds the limits the service runs with (it writes them at
  startup).
- The role `jobq_producer` may execute the two functions and nothing else.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0013_sql_enqueue.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    for statement in statements(
        """
        DROP FUNCTION IF EXISTS jobq.enqueue_many(text, jsonb);
        DROP FUNCTION IF EXISTS jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text);
        DROP FUNCTION IF EXISTS jobq.json_depth(jsonb, integer);
        DROP FUNCTION IF EXISTS jobq.enqueue_limits_for(text);
        DROP TABLE IF EXISTS jobq.enqueue_limits;
        """
    ):
        op.execute(statement)
