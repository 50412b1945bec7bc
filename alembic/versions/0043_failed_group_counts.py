"""A queue's failed jobs counted by type and error type as they move.

`GET /v1/queues/{queue}/failed/groups` grouped the queue's failed jobs at each call: a
heap fetch per failed job, spread through the history (the slowest operator read at
tens of millions of jobs, and the only one that grew with them). The statistics'
triggers (0025, 0040) now also append each statement's net change to every (queue,
type, error type) group of failed jobs it moved to `jobq.failed_group_deltas`; the
maintenance leader folds them into `jobq.failed_group_counts`, and the read adds the
two, then finds each group's latest failure by one probe of `jobs_failed_latest_idx`
(failed jobs only: enqueue, lease and complete never write it).

Counting the failed jobs stored and building the index read the table once, holding
off writes meanwhile (seconds on millions of jobs): apply it at a quiet time.

Revision ID: 0043
Revises: 0042
Create Date: 2026-11-29
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0043_failed_group_counts.sql")
BEFORE = {
    "count_job_changes": "0040_cheaper_update_counts.sql",
    "recount_statistics": "0035_recent_sums.sql",
    "forget_job_counts": "0025_queue_statistics.sql",
}


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    # each function as the migration that last made it left it
    for function, migration in BEFORE.items():
        sql = Path(__file__).with_name(migration).read_text(encoding="utf-8")
        heads = (
            f"CREATE FUNCTION jobq.{function}()",
            f"CREATE OR REPLACE FUNCTION jobq.{function}()",
        )
        (before,) = (s for s in statements(sql) if s.lstrip().startswith(heads))
        op.execute(before.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute("DROP INDEX jobq.jobs_failed_latest_idx")
    op.execute("DROP TABLE jobq.failed_group_deltas")
    op.execute("DROP TABLE jobq.failed_group_counts")
