"""A job's progress percent is stored as sent: double precision, not real (a float32 turned
66.666666666666667 into 66.66666412353516).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Rewrites the jobs table once (the column's type changes), under an exclusive lock.
    op.execute("ALTER TABLE jobq.jobs ALTER COLUMN progress_percent TYPE double precision")


def downgrade() -> None:
    op.execute("ALTER TABLE jobq.jobs ALTER COLUMN progress_percent TYPE real")
