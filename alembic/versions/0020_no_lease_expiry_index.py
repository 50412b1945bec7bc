"""No index of lease ends: a heartbeat becomes a HOT update, and a lease writes one entry less.

`jobs_lease_expiry_idx` (lease_expires_at, running jobs only) served one reader, the
reaper, once every `JOBQ_REAPER_INTERVAL_SECONDS` (5). Its writers were on every hot
path: each lease added an entry, and each heartbeat that extended a lease wrote a new
row version through every index of the table (no HOT update: an indexed column
changed). Counted by `python -m bench.pg_calls` (PostgreSQL's instructions per job):
lease 100 + finish 217.8k with it, 208.8k without; the single job (enqueue, lease,
complete) 1,246.8k and 1,217.8k; lease 100, one heartbeat each, finish 597.8k and
519.4k, nearly every heartbeat now a HOT update (the table's fill factor of 90 leaves
room on the page).

The reaper now reads the running jobs through `jobs_running_idx` and sorts the expired
ones itself: on 1,000,000 finished jobs, 0.4 ms a pass with 1,000 running, 1.4 ms with
10,000 and 15 ms with 100,000 (against 0.4 ms at any size with the index), once every
five seconds on one replica.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS jobq.jobs_lease_expiry_idx")


def downgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS jobs_lease_expiry_idx ON jobq.jobs (lease_expires_at)
            WHERE state = 'running'
        """
    )
