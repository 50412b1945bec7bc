"""Dependencies settled level by level, checked at commit, bounded and kept to readable queues.

- `jobq.settle_dependents(parents, states)` and `jobq.revive_dependents(parent)` walk
  the whole cascade below a parent in a loop, one set of statements a level: a chain
  nests no call, where the trigger's recursion stopped with `stack depth limit
  exceeded` past a few hundred levels (cancel, delete, purge, a final failure and the
  reaper's pass all failed with it). The children a cascade changes fire the state
  trigger one level down, where it only tells their watchers.
- Revival re-checks a child's other parents: one that another parent still fails stays
  cancelled and names that parent; `jobq.blocking_parent(id)` says why a child cannot
  be retried. A deleted parent cancels its waiting children whatever its own state (a
  retried child of a failed one waits for it too), and the cancelled ones name it.
- The enqueue reads its parents without locking or writing them; at commit, a deferred
  constraint trigger on the new edges locks them for that moment, marks the unmarked
  ones (`has_dependents` is written once per parent, not once per child), and settles
  the edges of parents that ended (or went) since. A producer's open transaction holds
  no lock on a job it did not make.
- Limits in `jobq.enqueue_limits` (the service writes its settings): how far below the
  first job of its chain a job may stand (`max_dependency_depth`, each edge holds its
  child's depth), jobs per batch and `depends_on` entries per call.
- `parent_queues`, `parent_queue_patterns`: the HTTP enqueue passes its key's queues;
  a parent elsewhere is refused as a missing one.
- The schema's functions are no longer PUBLIC's: `jobq_producer` keeps the two enqueue
  functions, the roles granted the jobs table (a service role other than the owner)
  all of them.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

from app.db.sqlscript import statements

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0021_iterative_dependencies.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def _migration(name: str) -> ModuleType:
    """An earlier migration's module (their file names are no module names)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(name))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _defined_in(script: str, *names: str) -> list[str]:
    """The statements of an earlier migration's script that create these functions."""
    path = Path(__file__).with_name(script)
    found = []
    for statement in statements(path.read_text(encoding="utf-8")):
        lines = statement.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments above it
        code = "\n".join(lines)
        if any(code.startswith(f"CREATE FUNCTION jobq.{name}(") for name in names):
            found.append(code)
    return found


def downgrade() -> None:
    for statement in statements(
        """
        DROP TRIGGER job_dependencies_checked_at_commit ON jobq.job_dependencies;
        DROP FUNCTION jobq.check_new_dependencies();
        DROP FUNCTION jobq.enqueue_many(text, jsonb, text[], text[]);
        DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
            integer, integer, text, jsonb, bigint[], text, text, text[], text[]);
        DROP FUNCTION jobq.blocking_parent(bigint);
        DROP FUNCTION jobq.settle_dependents(bigint[], text[], bigint);
        DROP FUNCTION jobq.revive_dependents(bigint);
        DROP FUNCTION jobq.enqueue_limits_for(text);
        ALTER TABLE jobq.job_dependencies DROP COLUMN depth;
        ALTER TABLE jobq.enqueue_limits DROP COLUMN max_dependency_depth,
            DROP COLUMN max_batch_jobs, DROP COLUMN max_batch_dependencies;
        """
    ):
        op.execute(statement)
    for statement in _defined_in(
        "0010_dependencies.sql", "settle_dependents", "revive_dependents", "after_job_delete"
    ):
        op.execute(statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute("DROP FUNCTION jobq.parent_failed(bigint, text)")
    for statement in _defined_in(
        "0013_sql_enqueue.sql", "enqueue_limits_for", "enqueue", "enqueue_many"
    ):
        op.execute(statement)
    # the state trigger's function as 0019 left it
    cheaper_row_checks = _migration("0019_cheaper_row_checks.py")
    op.execute(cheaper_row_checks._FUNCTION.format(guard=cheaper_row_checks._GUARD))
    op.execute(
        """
        DO $$
        BEGIN
            GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobq TO PUBLIC;
            REVOKE EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
                double precision, integer, integer, text, jsonb, bigint[], text, text)
                FROM PUBLIC;
            REVOKE EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb) FROM PUBLIC;
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
                GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer,
                    timestamptz, double precision, integer, integer, text, jsonb, bigint[],
                    text, text) TO jobq_producer;
                GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb) TO jobq_producer;
            END IF;
        END
        $$
        """
    )
