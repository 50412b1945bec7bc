"""A succeeded job's last attempt lives in its own columns: a complete writes no history.

Until now every finish appended a record to `attempts`; building that jsonb object cost
PostgreSQL about a sixth of its CPU per job. A complete now keeps `worker_id` and
appends nothing: the job's `attempt`, `lease_id`, `worker_id`, `lease_key_id`,
`attempted_at` and `finished_at` are that attempt's record. `jobq.attempts_of(job)`
gives the whole history as the API shows it (the service builds the same in
`JobRow.history`). Failures, expiries and cancellations still append their record.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# The record a succeeded job's columns stand for, as jobq.attempt_record writes one.
_LAST_RECORD = """jsonb_build_object(
    'attempt', job.attempt, 'lease_id', job.lease_id, 'worker_id', job.worker_id,
    'key_id', job.lease_key_id, 'started_at', job.attempted_at,
    'finished_at', job.finished_at, 'outcome', 'succeeded', 'error', NULL)"""


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION jobq.attempts_of(job jobq.jobs)
        RETURNS jsonb
        LANGUAGE sql STABLE
        AS $$
            SELECT CASE WHEN job.state = 'succeeded' AND job.lease_id IS NOT NULL
                        THEN job.attempts || {_LAST_RECORD}
                        ELSE job.attempts END
        $$
        """
    )
    op.execute(
        "COMMENT ON FUNCTION jobq.attempts_of(jobq.jobs) IS "
        "'A job''s ended attempts, as the API shows them: a succeeded job''s last "
        "one is its own columns.'"
    )
    # Succeeded jobs finished before: their last record moves into the columns.
    op.execute(
        """
        UPDATE jobq.jobs
           SET worker_id = attempts -> -1 ->> 'worker_id',
               attempts = attempts - (-1)
         WHERE state = 'succeeded'
           AND attempts -> -1 ->> 'lease_id' = lease_id::text
           AND attempts -> -1 ->> 'outcome' = 'succeeded'
        """
    )


def downgrade() -> None:
    op.execute(
        f"""
        UPDATE jobq.jobs AS job
           SET attempts = job.attempts || {_LAST_RECORD}, worker_id = NULL
         WHERE job.state = 'succeeded' AND job.lease_id IS NOT NULL
        """
    )
    op.execute("DROP FUNCTION jobq.attempts_of(jobq.jobs)")
