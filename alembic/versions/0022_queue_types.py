"""`jobq.queue_types`: each (queue, type) whose jobs a worker leased, and when last.

The lease writes a pair at most once every few seconds per service process
(`app.jobs.LeasedTypes`), never per job. `GET /v1/queues/{queue}` reads it by its key:
a queue never leased from that has no jobs and no settings is unknown (a typo, most
likely), and the types at the head of a queue that no worker leased lately are named.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.queue_types (
            queue text NOT NULL,
            type text NOT NULL,
            last_leased_at timestamptz NOT NULL,
            PRIMARY KEY (queue, type)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.queue_types")
