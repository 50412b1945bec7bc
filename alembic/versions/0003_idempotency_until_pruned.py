"""An idempotency key holds for as long as its job exists, not only while it is unfinished.

A producer that retries an enqueue after a crash must get the first job back even when
that job already ran; the key is free again once retention deletes the job.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Under the old rule, finished jobs may share a key with a newer job: the newest keeps it.
    op.execute(
        """
        UPDATE jobq.jobs SET idempotency_key = NULL
         WHERE id IN (
            SELECT id FROM (
                SELECT id, row_number() OVER (
                           PARTITION BY queue, idempotency_key ORDER BY id DESC) AS newest
                  FROM jobq.jobs
                 WHERE idempotency_key IS NOT NULL
            ) ranked
             WHERE newest > 1)
        """
    )
    op.execute("DROP INDEX jobq.jobs_idempotency_idx")
    op.execute(
        """
        CREATE UNIQUE INDEX jobs_idempotency_idx ON jobq.jobs (queue, idempotency_key)
            WHERE idempotency_key IS NOT NULL
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX jobq.jobs_idempotency_idx")
    op.execute(
        """
        CREATE UNIQUE INDEX jobs_idempotency_idx ON jobq.jobs (queue, idempotency_key)
            WHERE idempotency_key IS NOT NULL AND state IN ('queued', 'running')
        """
    )
