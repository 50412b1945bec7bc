"""`jobq.push_targets`: the HTTP endpoint of each pushed queue.

A queue with a row here is pushed: the dispatcher of each replica leases its due jobs
(the same claim, limits and fencing as a worker's lease) and POSTs each to `url`,
signed with `secrets` (one, or two while one is rotated in), with `headers` added, each
attempt within `timeout_seconds`. Workers' leases pass it over. Without a row the queue
is pulled, as before. The secrets are kept as given: jobq must sign with them; no
answer, log line or metric shows them (see `app.push`).

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.push_targets (
            queue text PRIMARY KEY,
            url text NOT NULL,
            headers jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
            timeout_seconds double precision NOT NULL CHECK (timeout_seconds > 0),
            secrets text[] NOT NULL CHECK (cardinality(secrets) BETWEEN 1 AND 2),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.push_targets")
