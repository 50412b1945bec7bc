"""Index failed and cancelled jobs by queue, for the queue statistics.

Failed jobs are kept for a week (retention) and are what operators look at first; this
partial index counts them per queue without reading the succeeded ones, and finds a
queue's failed jobs by when they failed. It only holds jobs in those two states, so
the hot path (enqueue, lease, finish as succeeded) never writes to it.

Building it reads the whole table once, holding off writes meanwhile (seconds on
millions of jobs): apply it at a quiet time, or create the same index by hand with
`CREATE INDEX CONCURRENTLY` beforehand (this migration then leaves it as it is).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS jobs_dead_idx ON jobq.jobs (queue, state, finished_at)
            WHERE state IN ('failed', 'cancelled')
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX jobq.jobs_dead_idx")
