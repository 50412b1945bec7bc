"""Job dependencies and waiting for a job's result.

- `jobq.job_dependencies` holds one edge per (child, parent). A child waits (`waiting`)
  while `waiting_for`, its count of parents not yet satisfied, is above 0.
- What happens to a parent's dependents is decided in one place, a trigger on the jobs
  table, so every transition gets it in the same transaction: a finish, the reaper,
  an operator's cancel, retry or delete. A parent that succeeds (or fails, for a child
  that runs anyway) resolves its edges, and the last one queues the child; one that
  fails for good cancels its waiting dependents, transitively; retrying it brings them
  back. The trigger's statements take a fresh snapshot, so an edge committed while the
  parent's finish waited for its row is seen. The trigger fires only for jobs with
  dependents (or someone waiting for their result): other jobs pay nothing.
- `notify_finish` asks for `NOTIFY jobq_finished, '<id>'` when the job finishes (set
  by `GET /v1/jobs/{id}?wait_seconds=`).
- Enqueueing jobs with dependencies from SQL (and from the HTTP enqueue) is migration
  0013's `jobq.enqueue`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0010_dependencies.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    for statement in statements(
        """
        DROP TRIGGER IF EXISTS jobs_settle_dependents ON jobq.jobs;
        DROP TRIGGER IF EXISTS jobs_forget_dependencies ON jobq.jobs;
        DROP FUNCTION IF EXISTS jobq.after_job_state_change();
        DROP FUNCTION IF EXISTS jobq.after_job_delete();
        DROP FUNCTION IF EXISTS jobq.settle_dependents(bigint, text);
        DROP FUNCTION IF EXISTS jobq.revive_dependents(bigint);
        DROP TABLE IF EXISTS jobq.job_dependencies;
        DELETE FROM jobq.jobs WHERE state = 'waiting';
        DROP INDEX IF EXISTS jobq.jobs_waiting_idx;
        ALTER TABLE jobq.jobs
            DROP COLUMN waiting_for, DROP COLUMN has_parents, DROP COLUMN has_dependents,
            DROP COLUMN run_on_parent_failure, DROP COLUMN notify_finish;
        """
    ):
        op.execute(statement)
