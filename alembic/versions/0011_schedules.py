"""Cron schedules: what to enqueue and when, and the jobs each tick made.

The scheduler (the replica holding the maintenance lock) enqueues a schedule's due
ticks and advances its `next_tick` in one transaction; each tick's job carries the
idempotency key `schedule:<name>:<tick>`, so a tick is enqueued once whatever happens.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.schedules (
            name            text PRIMARY KEY,
            queue           text NOT NULL,
            type            text NOT NULL,
            payload         jsonb NOT NULL DEFAULT 'null',
            cron            text NOT NULL,
            timezone        text NOT NULL DEFAULT 'UTC',
            priority        smallint NOT NULL DEFAULT 0,
            max_attempts    integer,
            lease_seconds   integer,
            metadata        jsonb NOT NULL DEFAULT '{}',
            paused          boolean NOT NULL DEFAULT false,
            -- after downtime: the most recent missed tick, none of them, or all (a cap)
            catch_up        text NOT NULL DEFAULT 'latest'
                            CHECK (catch_up IN ('latest', 'none', 'all')),
            catch_up_limit  integer NOT NULL DEFAULT 100 CHECK (catch_up_limit >= 1),
            next_tick       timestamptz NOT NULL,
            last_tick       timestamptz,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    # The scheduler reads the due schedules only.
    op.execute("CREATE INDEX schedules_due_idx ON jobq.schedules (next_tick) WHERE NOT paused")
    # The jobs each schedule made, newest first (at most the last 100 per schedule).
    op.execute(
        """
        CREATE TABLE jobq.schedule_runs (
            schedule    text NOT NULL,
            tick        timestamptz NOT NULL,
            job_id      bigint,
            enqueued_at timestamptz NOT NULL DEFAULT now(),
            -- why no job was made (the queue was full), if none was
            refused     text,
            PRIMARY KEY (schedule, tick)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.schedule_runs")
    op.execute("DROP TABLE jobq.schedules")
