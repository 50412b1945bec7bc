"""Tune the jobs table for churn; index finished jobs for retention.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every job is inserted, updated a few times and deleted: vacuum and analyze after
    # 2 % of the table changed rather than 20 %, without the cost-based sleeps, and leave
    # room in each page for the new versions of its rows.
    op.execute(
        """
        ALTER TABLE jobq.jobs SET (
            fillfactor = 90,
            autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_vacuum_insert_scale_factor = 0.02,
            autovacuum_analyze_scale_factor = 0.02,
            autovacuum_vacuum_cost_delay = 0
        )
        """
    )
    # Retention deletes finished jobs oldest first.
    op.execute(
        """
        CREATE INDEX jobs_finished_idx ON jobq.jobs (finished_at)
            WHERE finished_at IS NOT NULL
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX jobq.jobs_finished_idx")
    op.execute(
        """
        ALTER TABLE jobq.jobs RESET (
            fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
            autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay
        )
        """
    )
