"""Failed and cancelled jobs listed in id order from an index of their own.

`GET /v1/jobs?queue=Q&state=failed` (the dashboard's and `jobq jobs list`'s page of a
queue's failed jobs) is ordered by id. The index of dead jobs (0006) is in finish order,
so the page read every failed job of the queue and sorted them: at a million jobs of
history, 1,000 rows and 40 ms a page, growing with the history kept. This index gives
the page in id order, 50 rows read for 50 shown. It only holds jobs that ended failed
or cancelled, so enqueue, lease and complete never write it.

Building it reads the whole table once, holding off writes meanwhile (seconds on
millions of jobs): apply it at a quiet time, or create the same index by hand with
`CREATE INDEX CONCURRENTLY` beforehand (this migration then leaves it as it is).

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS jobs_dead_by_id_idx ON jobq.jobs (queue, state, id)
            WHERE state IN ('failed', 'cancelled')
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX jobq.jobs_dead_by_id_idx")
