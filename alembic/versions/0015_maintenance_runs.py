"""The maintenance leader's last passes, for operators (`GET /v1/queues`, the dashboard):
each reaper pass that led records when it ended, in the same statement that reaps.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.maintenance_runs (
            task         text PRIMARY KEY,
            finished_at  timestamptz NOT NULL,
            jobs         integer NOT NULL
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.maintenance_runs")
