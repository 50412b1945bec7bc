"""Flow control: per-queue limits on running jobs and lease rate, concurrency keys, and
per-queue retry, lease and retention policy.

- `jobq.queues` gains the limits (`max_running`, `max_running_per_key`, `rate_limit_jobs`
  per `rate_limit_seconds`), a generated `limited` flag the plain claim skips (a limited
  queue is leased only by the claim that counts, under its settings row's lock), and the
  policy that overrides the service's defaults for the queue: `max_attempts`,
  `lease_seconds`, `backoff_base_seconds`, `backoff_cap_seconds`, `backoff_jitter`,
  `retain_succeeded_seconds`, `retain_failed_seconds`.
- `jobq.jobs.concurrency_key`, with the index that walks a queue's keys that have queued
  jobs (only jobs with a key are in it).
- `jobq.queue_rate_log`: the leases of rate-limited queues, a row per lease call, kept
  for one window (the claim prunes it).
- `jobq.queue_retry_at(queue, ...)`: the backoff with the queue's overrides.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE jobq.queues
            ADD COLUMN max_running integer CHECK (max_running >= 1),
            ADD COLUMN max_running_per_key integer CHECK (max_running_per_key >= 1),
            ADD COLUMN rate_limit_jobs integer CHECK (rate_limit_jobs >= 1),
            ADD COLUMN rate_limit_seconds double precision CHECK (rate_limit_seconds > 0),
            ADD COLUMN max_attempts integer CHECK (max_attempts BETWEEN 1 AND 1000),
            ADD COLUMN lease_seconds integer CHECK (lease_seconds >= 1),
            ADD COLUMN backoff_base_seconds double precision CHECK (backoff_base_seconds >= 0),
            ADD COLUMN backoff_cap_seconds double precision CHECK (backoff_cap_seconds >= 0),
            ADD COLUMN backoff_jitter double precision
                CHECK (backoff_jitter >= 0 AND backoff_jitter < 1),
            ADD COLUMN retain_succeeded_seconds double precision
                CHECK (retain_succeeded_seconds >= 0),
            ADD COLUMN retain_failed_seconds double precision CHECK (retain_failed_seconds >= 0),
            ADD CONSTRAINT rate_limit_whole
                CHECK ((rate_limit_jobs IS NULL) = (rate_limit_seconds IS NULL)),
            ADD COLUMN limited boolean GENERATED ALWAYS AS (
                max_running IS NOT NULL OR max_running_per_key IS NOT NULL
                OR rate_limit_jobs IS NOT NULL) STORED
        """
    )
    op.execute("ALTER TABLE jobq.jobs ADD COLUMN concurrency_key text")
    # The keyed claim walks a queue's keys with queued jobs, then each key's best jobs.
    op.execute(
        """
        CREATE INDEX jobs_key_claim_idx
            ON jobq.jobs (queue, concurrency_key, priority DESC, run_at, id)
         WHERE state = 'queued' AND concurrency_key IS NOT NULL
        """
    )
    op.execute(
        """
        CREATE TABLE jobq.queue_rate_log (
            queue  text NOT NULL,
            at     timestamptz NOT NULL,
            jobs   integer NOT NULL CHECK (jobs >= 1)
        )
        """
    )
    op.execute("CREATE INDEX queue_rate_log_idx ON jobq.queue_rate_log (queue, at)")
    # When a failed attempt of a job in `queue` runs again: jobq.retry_at with the queue's
    # own backoff where it has one.
    op.execute(
        """
        CREATE FUNCTION jobq.queue_retry_at(
            queue text, attempt integer, retry_after double precision,
            backoff_base double precision, backoff_cap double precision,
            backoff_jitter double precision)
        RETURNS timestamptz
        LANGUAGE sql VOLATILE
        AS $$
            -- parameters named in full: jobq.queues has a backoff_jitter column too
            SELECT jobq.retry_at(
                       queue_retry_at.attempt, queue_retry_at.retry_after,
                       coalesce(q.backoff_base_seconds, queue_retry_at.backoff_base),
                       coalesce(q.backoff_cap_seconds, queue_retry_at.backoff_cap),
                       coalesce(q.backoff_jitter, queue_retry_at.backoff_jitter))
              FROM (SELECT) AS one
              LEFT JOIN jobq.queues q ON q.name = queue_retry_at.queue
        $$
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION jobq.queue_retry_at(text, integer, double precision, double precision,
                                          double precision, double precision);
        DROP TABLE jobq.queue_rate_log;
        DROP INDEX jobq.jobs_key_claim_idx;
        ALTER TABLE jobq.jobs DROP COLUMN concurrency_key;
        ALTER TABLE jobq.queues
            DROP COLUMN limited, DROP CONSTRAINT rate_limit_whole,
            DROP COLUMN max_running, DROP COLUMN max_running_per_key,
            DROP COLUMN rate_limit_jobs, DROP COLUMN rate_limit_seconds,
            DROP COLUMN max_attempts, DROP COLUMN lease_seconds,
            DROP COLUMN backoff_base_seconds, DROP COLUMN backoff_cap_seconds,
            DROP COLUMN backoff_jitter, DROP COLUMN retain_succeeded_seconds,
            DROP COLUMN retain_failed_seconds
        """
    )
