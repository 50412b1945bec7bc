"""The job-event outbox: every job and queue change leaves an event in its transaction.

- `jobq.job_events`: one narrow row per event (`enqueued`, `started`, `succeeded`,
  `failed`, `retrying`, `cancelled`, `queue_paused`, `queue_resumed`,
  `queue_settings`), written by statement-level triggers of their own on `jobq.jobs`
  and `jobq.queues` from the statement's transition tables: one INSERT per statement,
  in the change's transaction, so a rolled-back change leaves none and a committed one
  is never lost. The existing row triggers are untouched.
- `position`, the order readers follow, is the order of commit: ids come from a
  sequence and become visible out of commit order, so a reader resuming "after id N"
  could skip a late-committing smaller one. `jobq.stamp_events(batch_size)` (one
  session at a time, under an advisory lock) gives committed events the next gapless
  positions in id order and announces the last on `jobq_events`.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0032_job_events.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER queues_record_changes ON jobq.queues")
    op.execute("DROP TRIGGER queues_record_created ON jobq.queues")
    op.execute("DROP TRIGGER jobs_record_changes ON jobq.jobs")
    op.execute("DROP TRIGGER jobs_record_enqueued ON jobq.jobs")
    op.execute("DROP FUNCTION jobq.stamp_events(integer)")
    op.execute("DROP FUNCTION jobq.record_queues_changed()")
    op.execute("DROP FUNCTION jobq.queue_settings_of(jsonb)")
    op.execute("DROP FUNCTION jobq.record_jobs_changed()")
    op.execute("DROP FUNCTION jobq.record_jobs_enqueued()")
    op.execute("DROP TABLE jobq.job_events")
    op.execute("DROP TYPE jobq.event_kind")
