"""The last hour's activity and histograms kept per queue (`jobq.queue_recent`).

`GET /v1/queues` summed the last hour's per-minute rollups of every queue on each call,
expanding each minute's jsonb histograms: queues x minutes x buckets, 140 ms for 50
busy queues, more than the 20 ms the dashboard's poll may cost. The statistics' fold now
keeps the hour's sums per queue, kind and bucket as it folds, and takes away the
minutes the window leaves; the read sums a few rows a queue. `jobq.recount_statistics()`
empties it with the rest.

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0035_recent_sums.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION jobq.recount_statistics() RETURNS void
            LANGUAGE plpgsql
            AS $$
        BEGIN
            LOCK TABLE jobq.jobs IN SHARE MODE;
            DELETE FROM jobq.job_counts;
            DELETE FROM jobq.job_stat_deltas;
            DELETE FROM jobq.queue_minutes;
            INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
            SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
              FROM jobq.jobs j
             CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at,
                                                  j.started_at, j.attempted_at,
                                                  j.finished_at, 1, true) s
             GROUP BY 1, 2, 3, 4, 5;
        END
        $$
        """
    )
    op.execute("DROP FUNCTION jobq.minute_entries(bigint, bigint, bigint, jsonb, jsonb)")
    op.execute("DROP TABLE jobq.queue_recent_window")
    op.execute("DROP TABLE jobq.queue_recent")
