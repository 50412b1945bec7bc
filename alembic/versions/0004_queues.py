"""Per-queue settings: paused, and an optional maximum backlog.

A queue exists as soon as a job names it; it has a row here only once an operator
changed one of its settings, so enqueue never has to create one.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.queues (
            name         text PRIMARY KEY,
            -- leasing skips a paused queue; enqueue still works
            paused       boolean NOT NULL DEFAULT false,
            paused_at    timestamptz,
            -- enqueue answers 429 once the queue holds this many unfinished jobs
            max_backlog  integer CHECK (max_backlog >= 1),
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.queues")
