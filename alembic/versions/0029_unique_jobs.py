"""Uniqueness windows: `unique` options at enqueue (River's unique jobs, Oban's `unique`).

- `jobq.jobs` gains `unique_key`, `unique_period` (seconds), `unique_since` (the start
  of the period the job was enqueued in; '-infinity' without a period) and
  `unique_states` (a mask of `jobq.unique_state_bit`, IMMUTABLE, of the states the job
  holds its uniqueness in).
- `jobs_unique_idx`, a partial unique index on (queue, type, unique_key, unique_since)
  for the jobs in their own states, is the rule: one statement's `ON CONFLICT DO
  NOTHING` settles concurrent enqueues on any number of replicas.
- `jobq.insert_jobs` takes `uniques` (each job's options as JSON, NULL: none) and
  answers `replaced`: jobs with options are made one at a time, each answered by the
  job holding its key or its uniqueness, whose payload and run time are replaced when
  it is queued and the options say `on_conflict: replace`. Jobs without options take
  the statements they took before. Admission control counts a job whose uniqueness is
  held as no new job (`jobq.new_job_keys`).
- `jobq.check_unique` refuses options as the API does; `jobq.enqueue` takes
  `unique_key`, `unique_period`, `unique_states`, `unique_on_conflict`, and
  `jobq.enqueue_many` an item's `unique` object; both answer `replaced`.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0029_unique_jobs.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def _from_0026(*names: str) -> list[str]:
    """The statements of migration 0026's script that create these functions, and its
    grants (a DO block that grants what it made: running it again changes nothing)."""
    found = []
    for statement in statements(SQL.with_name("0026_fair_queues.sql").read_text("utf-8")):
        lines = statement.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments above it
        code = "\n".join(lines).replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", 1)
        creates = any(code.startswith(f"CREATE FUNCTION jobq.{name}(") for name in names)
        if creates or code.startswith("DO $$"):
            found.append(code)
    return found


def downgrade() -> None:
    for statement in statements(
        """
        DROP FUNCTION jobq.enqueue_many(text, jsonb, text[], text[]);
        DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
            integer, integer, text, jsonb, bigint[], text, text, text[], text[], text, text,
            integer, text[], text);
        DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[],
            double precision[], integer[], integer[], text[], jsonb[], text[], integer,
            integer, integer[], boolean[], jsonb[], text[], jsonb[]);
        DROP FUNCTION jobq.new_job_keys(text, text[], text[], jsonb[]);
        DROP FUNCTION jobq.check_unique(jsonb, text);
        DROP FUNCTION jobq.unique_states_mask(jsonb);
        DROP FUNCTION jobq.unique_since(jsonb);
        DROP FUNCTION jobq.unique_holder(text, text, text, timestamptz);
        DROP INDEX jobq.jobs_unique_idx;
        ALTER TABLE jobq.jobs DROP COLUMN unique_key, DROP COLUMN unique_period,
            DROP COLUMN unique_since, DROP COLUMN unique_states;
        DROP FUNCTION jobq.unique_state_bit(jobq.job_state);
        """
    ):
        op.execute(statement)
    # the three functions as 0026 made them, with its grants
    for statement in _from_0026("insert_jobs", "enqueue", "enqueue_many"):
        op.execute(statement)
