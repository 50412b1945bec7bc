"""Queue statistics kept as jobs move, so that reading them costs O(queues), not O(jobs).

- `jobq.job_counts` (queue, state, jobs): every job counted by state, exactly.
- `jobq.queue_minutes` (queue, minute): jobs enqueued, succeeded and failed for good in
  that minute, and histograms of their wait (enqueue to first lease) and run (last
  attempt) times in duration buckets (`jobq.duration_bucket`: half powers of two from a
  millisecond, so a percentile read from them is within 19 % of the true one). Kept for
  `stats_retention_days`, deleted by the maintenance leader.
- Statement-level triggers on `jobq.jobs` append each statement's net change to
  `jobq.job_stat_deltas`: no row that concurrent transactions update, so no enqueue,
  lease or finish waits on another. The leader folds the deltas into the two tables in
  slices; `jobq.queue_job_counts` and `jobq.queue_minute_stats` add the deltas not folded
  yet, and `jobq.queue_overview(queue)` reads the counts with the due jobs' heads.
- `jobq.recount_statistics()` makes them again from the jobs stored: this migration runs
  it (a table filled with the triggers off can too).

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0025_queue_statistics.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER jobs_forget_counts ON jobq.jobs")
    op.execute("DROP TRIGGER jobs_count_deletes ON jobq.jobs")
    op.execute("DROP TRIGGER jobs_count_updates ON jobq.jobs")
    op.execute("DROP TRIGGER jobs_count_inserts ON jobq.jobs")
    op.execute("DROP FUNCTION jobq.recount_statistics()")
    op.execute("DROP FUNCTION jobq.queue_overview(text)")
    op.execute("DROP FUNCTION jobq.queue_minute_stats()")
    op.execute("DROP FUNCTION jobq.queue_job_counts()")
    op.execute("DROP FUNCTION jobq.add_buckets(jsonb, jsonb)")
    op.execute("DROP FUNCTION jobq.forget_job_counts()")
    op.execute("DROP FUNCTION jobq.count_job_changes()")
    op.execute(
        "DROP FUNCTION jobq.job_stats_of(text, jobq.job_state, timestamptz, timestamptz, "
        "timestamptz, timestamptz, integer, boolean)"
    )
    op.execute("DROP FUNCTION jobq.bucket_seconds(smallint)")
    op.execute("DROP FUNCTION jobq.duration_bucket(double precision)")
    op.execute("DROP TABLE jobq.job_stat_deltas")
    op.execute("DROP TABLE jobq.queue_minutes")
    op.execute("DROP TABLE jobq.job_counts")
