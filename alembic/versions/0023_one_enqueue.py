"""One enqueue: the HTTP API and the SQL functions make jobs with the same statement.

- `jobq.insert_jobs(queue, arrays…, default_max_attempts, default_lease_seconds)` is
  the enqueue's rules in one place: each job's defaults (its own, else the queue's
  settings, else the service's), admission control under the queue's `max_backlog`
  (all or nothing), idempotency keys (the job holding one is the answer), the wake-up,
  and, for a job with parents, the state its parents give it. The HTTP enqueue calls
  it for one job and for a batch; `jobq.enqueue` calls it after its own checks of the
  fields (the API's schema checks them over HTTP) and of the parents. One job is made
  by a plain INSERT (a single enqueue pays for no CTE), a batch by one set-based
  statement, which also answers a single job that the INSERT did not make.
- `jobq.check_job(limits, fields…)` refuses what the API's schema refuses: the checks
  `jobq.enqueue` made itself, for `jobq.enqueue_many` to make first for a whole batch
  that names no parent, then make it with one `jobq.insert_jobs` call.
- `jobq.backlog_refusal(queue, keys)` is admission control: `jobq.insert_jobs`,
  `jobq.enqueue`'s check before it reads parents and `jobq.enqueue_many`'s up-front
  count use it. `jobq.enqueue_many` counts a key named
  twice in a batch once, as the HTTP batch always did (it counted it twice).
- `jobq.enqueue`, `jobq.enqueue_many`: same signatures, grants and answers; only the
  service's roles may call the three new functions.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

from app.db.sqlscript import statements

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0023_one_enqueue.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def _iterative_dependencies() -> ModuleType:
    """Migration 0021's module (its file name is no module name)."""
    path = Path(__file__).with_name("0021_iterative_dependencies.py")
    spec = importlib.util.spec_from_file_location("migration_0021", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    # the two functions as 0021 left them (replaced in place: their grants stay)
    for statement in _iterative_dependencies()._defined_in(
        "0021_iterative_dependencies.sql", "enqueue", "enqueue_many"
    ):
        op.execute(statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute(
        "DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[], "
        "double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer, "
        "integer[], boolean[], jsonb[])"
    )
    op.execute("DROP FUNCTION jobq.backlog_refusal(text, text[])")
    op.execute(
        "DROP FUNCTION jobq.check_job(jobq.enqueue_limits, text, text, jsonb, integer, "
        "timestamptz, double precision, integer, integer, text, jsonb, text, text, integer)"
    )
