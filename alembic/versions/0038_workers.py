"""Workers' presence: every worker that called, idle or busy, and whether it is quiet.

- `jobq.workers`: one row per worker id, written by each replica's presence flush (one
  upsert of the workers it saw since the last, every ~2 s): what it says it is (`sdk`,
  `version`, `host`), what it serves (`queues`, `types`; NULL: not said yet), when it
  was first and last seen, its counters (`leased`, `finished`) and the finished jobs of
  its current minute window (`window_at`, `window_finished`) with the rate of the one
  before (`finished_per_minute`). `quiet` (with `quiet_at`, `quieted_by`, the key's
  name) asks it to lease no more; the flushes read the quiet set back, so every
  replica learns it. Rows not seen for `JOBQ_WORKER_RETAIN_SECONDS` are pruned.

Revision ID: 0038
Revises: 0037
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.workers (
            worker_id text PRIMARY KEY,
            sdk text,
            version text,
            host text,
            queues text[],
            types text[],
            first_seen timestamptz NOT NULL DEFAULT now(),
            last_seen timestamptz NOT NULL DEFAULT now(),
            leased bigint NOT NULL DEFAULT 0,
            finished bigint NOT NULL DEFAULT 0,
            window_at timestamptz NOT NULL DEFAULT now(),
            window_finished bigint NOT NULL DEFAULT 0,
            finished_per_minute double precision NOT NULL DEFAULT 0,
            quiet boolean NOT NULL DEFAULT false,
            quiet_at timestamptz,
            quieted_by text
        )
        """
    )
    op.execute("CREATE INDEX workers_last_seen ON jobq.workers (last_seen)")
    op.execute("CREATE INDEX workers_quiet ON jobq.workers (worker_id) WHERE quiet")
    op.execute(
        "COMMENT ON TABLE jobq.workers IS"
        " 'Workers seen by any replica: what they serve, when last seen, whether quiet.'"
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.workers")
