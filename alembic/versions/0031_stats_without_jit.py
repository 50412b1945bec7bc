"""`jobq.queue_overview` is planned without JIT compilation.

Its probe per priority in use is a recursive CTE the planner guesses at 100 rows a
queue, so with a few dozen queues the estimate passes `jit_above_cost` on any table,
empty or full, and PostgreSQL spent 130-600 ms compiling a statement that runs in
under 10 ms (`GET /v1/queues` at 1,000 rows: 169 ms, 9 ms without JIT). A function's
own `SET jit = off` holds while it runs and leaves the session's setting alone (safe
behind PgBouncer). A later `CREATE OR REPLACE` of the function must keep the clause:
`tests/db/test_statistics_plans.py` checks it.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER FUNCTION jobq.queue_overview(text) SET jit = off")


def downgrade() -> None:
    op.execute("ALTER FUNCTION jobq.queue_overview(text) RESET jit")
