"""SQL for what several statements share: announcing due jobs, the backoff, the record
of a finished attempt (functions), and the job sets the statistics read (views).

The statements live in each domain's `queries.sql`; what more than one of them needs is
defined once here, in SQL, instead of being pasted into each by Python. The scalar
functions are plain SQL, which the planner inlines into the calling statement, and it
pushes a statement's filters down into the views.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # `NOTIFY jobq_due, '<queue> <epoch of the earliest run_at> [<jobs>]'`: the listener
    # (app/db/listener.py) wakes that many waiting lease requests; without a count, all.
    op.execute(
        """
        CREATE FUNCTION jobq.announce_due(queue text, due timestamptz, jobs bigint)
        RETURNS void
        LANGUAGE sql VOLATILE
        AS $$
            SELECT pg_notify('jobq_due', concat_ws(' ', queue, extract(epoch FROM due), jobs))
        $$
        """
    )
    # When a failed attempt runs again: after `retry_after` seconds if the worker said,
    # else base * 2^(attempt-1), capped, then ±jitter.
    op.execute(
        """
        CREATE FUNCTION jobq.retry_at(
            attempt integer, retry_after double precision,
            backoff_base double precision, backoff_cap double precision,
            backoff_jitter double precision)
        RETURNS timestamptz
        LANGUAGE sql VOLATILE
        AS $$
            SELECT now() + make_interval(secs => coalesce(retry_after,
                least(backoff_base * power(2, attempt - 1), backoff_cap)
                * (1 + backoff_jitter * (2 * random() - 1))))
        $$
        """
    )
    # One element of a job's `attempts` history, for the attempt that just ended.
    op.execute(
        """
        CREATE FUNCTION jobq.attempt_record(
            attempt integer, lease_id uuid, worker_id text, key_id bigint,
            started_at timestamptz, outcome text, error jsonb)
        RETURNS jsonb
        LANGUAGE sql STABLE
        AS $$
            SELECT jsonb_build_object(
                'attempt', attempt, 'lease_id', lease_id, 'worker_id', worker_id,
                'key_id', key_id, 'started_at', started_at, 'finished_at', now(),
                'outcome', outcome, 'error', error)
        $$
        """
    )

    # Queued and running jobs, each set read through its own partial index.
    op.execute(
        """
        CREATE VIEW jobq.live_jobs AS
        SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
          FROM jobq.jobs
         WHERE state = 'queued'
        UNION ALL
        SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
          FROM jobq.jobs
         WHERE state = 'running'
        """
    )
    # Failed and cancelled jobs per queue, through their partial index (migration 0006).
    op.execute(
        """
        CREATE VIEW jobq.dead_job_counts AS
        SELECT queue,
               count(*) FILTER (WHERE state = 'failed') AS failed,
               count(*) FILTER (WHERE state = 'cancelled') AS cancelled
          FROM jobq.jobs
         WHERE state IN ('failed', 'cancelled')
         GROUP BY queue
        """
    )


def downgrade() -> None:
    op.execute("DROP VIEW jobq.dead_job_counts")
    op.execute("DROP VIEW jobq.live_jobs")
    op.execute(
        "DROP FUNCTION jobq.attempt_record(integer, uuid, text, bigint, timestamptz, text, jsonb)"
    )
    op.execute(
        "DROP FUNCTION jobq.retry_at(integer, double precision, double precision, "
        "double precision, double precision)"
    )
    op.execute("DROP FUNCTION jobq.announce_due(text, timestamptz, bigint)")
