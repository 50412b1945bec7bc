"""An update's statistics cost less: its rows are grouped before they are spread.

`jobq.count_job_changes()` (migration 0025) spread every old and new row of an update
into its five statistics (count by state, enqueue minute, wait bucket, outcome, run
bucket) and then added them up: ten rows of expressions a job for a lease or a complete.
Its update branch now groups the old and new rows by what they count in first, drops
the groups that cancel out, and spreads only the groups left: a lease or a complete of
many jobs makes a few. The deltas written are the same (each statistic's net change),
so jobs in flight at the upgrade stay counted exactly: deltas written before it and
after it add up alike, and the function is replaced in the migration's transaction.
The insert and delete branches are unchanged.

Revision ID: 0040
Revises: 0039
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0040_cheaper_update_counts.sql")
BEFORE = Path(__file__).with_name("0025_queue_statistics.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    # 0025's function, as that migration made it
    (before,) = (
        s
        for s in statements(BEFORE.read_text(encoding="utf-8"))
        if s.lstrip().startswith("CREATE FUNCTION jobq.count_job_changes()")
    )
    op.execute(before.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
