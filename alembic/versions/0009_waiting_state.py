"""A job state for jobs waiting for others: `waiting`.

Added on its own: PostgreSQL lets a new enum value be used only once the transaction
that added it has committed, and the next migration uses it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TYPE jobq.job_state ADD VALUE IF NOT EXISTS 'waiting' BEFORE 'queued'")


def downgrade() -> None:
    # PostgreSQL cannot drop an enum value; 0010's downgrade removes every waiting job.
    pass
