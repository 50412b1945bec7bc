"""A job's lifecycle bounds: an execution timeout, a start deadline, snoozes.

- `jobs.timeout_seconds` (NULL: none), set at enqueue from the job's own, else its
  queue's new `queues.timeout_seconds` setting: no attempt runs longer. The claim ends
  a lease no later than `attempted_at + timeout_seconds`, heartbeats cannot extend it
  past that, and the reaper fails the attempt then with a `timeout` error.
- `jobs.start_by` (NULL: none): a job not leased by then never is; the reaper cancels
  it with a `last_error` of type `expired` (its dependents follow their
  `on_parent_failure`). `jobs_start_by_idx` holds the jobs with a deadline that may
  still start, what that pass reads.
- `jobs.snoozes`: how many times workers put the job back for later without spending
  an attempt.
- `jobq.insert_jobs` takes `timeouts` and `start_bys` (named, after the others);
  `jobq.enqueue` takes `timeout_seconds` and `start_by`, checked by the new
  `jobq.check_lifecycle`; `jobq.enqueue_many` reads them from each item (new
  signatures: dropped and made again, with their grants).

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0030_job_lifecycle.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def _created_in(script: str, *names: str) -> list[str]:
    """The statements of an earlier migration's script that (re)create these functions,
    as CREATE FUNCTION (this one dropped them)."""
    found = []
    for statement in statements(Path(__file__).with_name(script).read_text(encoding="utf-8")):
        lines = statement.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments above it
        code = "\n".join(lines).replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", 1)
        if any(code.startswith(f"CREATE FUNCTION jobq.{name}(") for name in names):
            found.append(code)
    return found


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision, "
        "integer, integer, text, jsonb, bigint[], text, text, text[], text[], text, text, "
        "integer, text[], text, integer, timestamptz)"
    )
    op.execute(
        "DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[], "
        "double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer, "
        "integer[], boolean[], jsonb[], text[], jsonb[], integer[], timestamptz[])"
    )
    op.execute("DROP FUNCTION jobq.check_lifecycle(integer, timestamptz, text)")
    # the functions as 0029 left them, and their grants
    for statement in _created_in("0029_unique_jobs.sql", "insert_jobs", "enqueue"):
        op.execute(statement)
    for statement in _created_in("0029_unique_jobs.sql", "enqueue_many"):
        op.execute(statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute("DROP INDEX jobq.jobs_start_by_idx")
    op.execute("ALTER TABLE jobq.queues DROP COLUMN timeout_seconds")
    op.execute(
        "ALTER TABLE jobq.jobs DROP COLUMN timeout_seconds, DROP COLUMN start_by, "
        "DROP COLUMN snoozes"
    )
    for statement in statements(
        """
        DO $$
        DECLARE
            grantee text;
        BEGIN
            REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA jobq FROM PUBLIC;
            FOR grantee IN
                SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
                 WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs'
                   AND g.grantee <> 'PUBLIC' AND g.grantee::text <> current_user
            LOOP
                EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobq TO %I', grantee);
            END LOOP;
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
                GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
                    double precision, integer, integer, text, jsonb, bigint[], text, text,
                    text[], text[], text, text, integer, text[], text) TO jobq_producer;
            END IF;
        END
        $$;
        """
    ):
        op.execute(statement)
