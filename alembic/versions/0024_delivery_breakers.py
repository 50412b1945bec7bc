"""`jobq.delivery_breakers`: the circuit breaker of each push target and subscription.

One row per target (`queue:<name>`, `subscription:<id>`, …), written by a failed
delivery and by the first success after failures, never by a delivery to a healthy
target. Every replica reads it before delivering, so a breaker one replica opened holds
all of them back until `open_until` (see `app.delivery.breaker`).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.delivery_breakers (
            target text PRIMARY KEY,
            failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
            trips integer NOT NULL DEFAULT 0 CHECK (trips >= 0),
            open_until timestamptz,
            failed_at timestamptz,
            last_error text
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.delivery_breakers")
