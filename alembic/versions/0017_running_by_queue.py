"""Index running jobs by queue and concurrency key, for the flow-control limits.

A lease of a limited queue counts the queue's running jobs (and each key's, for
`max_running_per_key`), and so do the statistics. Running jobs were indexed by lease
expiry only (for the reaper), so each count read every running job of every queue:
7 ms a count with 50,000 jobs running elsewhere, twice per limited lease, with the
queue's leases taking turns. This partial index holds running jobs only, so the count
reads the queue's own.

Building it reads the whole table once, holding off writes meanwhile (seconds on
millions of jobs): apply it at a quiet time, or create the same index by hand with
`CREATE INDEX CONCURRENTLY` beforehand (this migration then leaves it as it is).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS jobs_running_idx ON jobq.jobs (queue, concurrency_key)
            WHERE state = 'running'
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX jobq.jobs_running_idx")
