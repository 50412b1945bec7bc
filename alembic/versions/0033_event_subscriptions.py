"""Event subscriptions: HTTP endpoints that receive the job-event outbox's events.

- `jobq.event_subscriptions`: a subscription's URL, its filters (queues, job types,
  event kinds; NULL: all), its Standard Webhooks secrets (one, or two while rotating),
  and its cursor: `position`, the last event position delivered (events after it are
  still to send, in position order), with the retry state of the next batch
  (`attempts`, `next_attempt_at`) and the lease a dispatcher holds while it sends one
  (`lease_id`, `leased_until`: another replica takes it over once it expires).

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.event_subscriptions (
            name text PRIMARY KEY,
            url text NOT NULL,
            queues text[],
            types text[],
            kinds text[],
            secrets text[] NOT NULL CHECK (cardinality(secrets) BETWEEN 1 AND 2),
            paused boolean NOT NULL DEFAULT false,
            position bigint NOT NULL DEFAULT 0,
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            lease_id uuid,
            leased_until timestamptz,
            last_status integer,
            last_error text,
            delivered_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "COMMENT ON TABLE jobq.event_subscriptions IS"
        " 'Endpoints that receive job events, each with its cursor in jobq.job_events.'"
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.event_subscriptions")
