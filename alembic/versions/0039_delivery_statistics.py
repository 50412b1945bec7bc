"""Delivery statistics kept in the database, so that every replica answers the same.

- `jobq.push_minutes` (queue, minute): the deliveries to a pushed queue's target in that
  minute, counted by outcome class (`classes`: {"2xx": n, "202": n, "retry_later": n,
  "4xx": n, "5xx": n, "timeout": n, "connection": n, "refused": n}) and by latency in
  duration buckets (`latency_buckets`: `jobq.duration_bucket`, as
  `jobq.queue_minutes`' are). Each dispatcher counts its deliveries in memory and adds
  them every few seconds in one statement, never one per delivery; replicas add to the
  same rows. Kept for `stats_retention_days`, deleted by the maintenance leader.
- `jobq.event_subscriptions.missed`: the events that expired from the outbox (pruned by
  its retention, which no subscription holds back) before the subscription received
  them; its cursor then moves to the oldest event kept.

Revision ID: 0039
Revises: 0038
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.push_minutes (
            queue text NOT NULL,
            minute timestamptz NOT NULL,
            deliveries bigint NOT NULL DEFAULT 0,
            classes jsonb NOT NULL DEFAULT '{}',
            latency_buckets jsonb NOT NULL DEFAULT '{}',
            PRIMARY KEY (queue, minute)
        )
        """
    )
    op.execute("ALTER TABLE jobq.event_subscriptions ADD COLUMN missed bigint NOT NULL DEFAULT 0")
    op.execute("CREATE INDEX push_minutes_minute_idx ON jobq.push_minutes (minute)")
    op.execute(
        """
        COMMENT ON TABLE jobq.push_minutes IS
            'Deliveries to pushed queues'' targets per minute: by outcome class and by '
            'latency bucket (jobq.duration_bucket), added by each replica''s dispatcher.'
        """
    )


def downgrade() -> None:
    op.execute("ALTER TABLE jobq.event_subscriptions DROP COLUMN missed")
    op.execute("DROP TABLE jobq.push_minutes")
