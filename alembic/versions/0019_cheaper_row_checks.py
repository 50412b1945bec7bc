"""Checks a statement on the jobs table pays once, not on every statement.

PostgreSQL reads a table's CHECK constraints and a trigger's WHEN clause from their
stored node trees afresh in every statement that inserts or updates rows, before it
tests a single row: for a one-job statement that is most of what they cost. Counted by
`python -m bench.pg_calls` (enqueue, lease and complete one job), jobq.jobs' three range
checks cost 119k instructions of PostgreSQL's 1,846k a job, and the dependency
trigger's WHEN clause 147k. So:

- `attempt >= 0`, `max_attempts >= 1` and `lease_seconds >= 1` go from jobq.jobs. Every
  path that writes these columns checks them where the value comes from: the API's
  schemas, `jobq.enqueue` (migration 0013), the queue settings' own checks (0012), and
  now `jobq.enqueue_limits`, whose defaults the service writes at startup; `attempt`
  starts at 0 and only a lease adds 1 to it. `running_has_lease`, the invariant that
  keeps a running job within the reaper's reach, stays.
- The trigger that settles a finished job's dependents tests in its WHEN only whether
  the job has dependents or someone waiting for its result (the two flags); whether the
  state changed, and to what, its function tests, for those jobs only.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_RANGE_CHECKS = {
    "jobs_attempt_check": "attempt >= 0",
    "jobs_max_attempts_check": "max_attempts >= 1",
    "jobs_lease_seconds_check": "lease_seconds >= 1",
}
_LIMITS_CHECKS = {
    "enqueue_limits_default_max_attempts_check": "default_max_attempts >= 1",
    "enqueue_limits_default_lease_seconds_check": "default_lease_seconds >= 1",
    "enqueue_limits_max_lease_seconds_check": "max_lease_seconds >= default_lease_seconds",
}

_FUNCTION = """
CREATE OR REPLACE FUNCTION jobq.after_job_state_change()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    {guard}IF NEW.notify_finish AND NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        PERFORM pg_notify('jobq_finished', NEW.id::text);
    END IF;
    IF NEW.has_dependents THEN
        IF NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
            PERFORM jobq.settle_dependents(NEW.id, NEW.state::text);
        ELSIF OLD.state IN ('failed', 'cancelled') THEN
            PERFORM jobq.revive_dependents(NEW.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$
"""
_GUARD = """IF OLD.state IS NOT DISTINCT FROM NEW.state THEN
        RETURN NULL;  -- an update that set the state it had
    END IF;
    """

_TRIGGER = """
CREATE TRIGGER jobs_settle_dependents
    AFTER UPDATE OF state ON jobq.jobs
    FOR EACH ROW
    WHEN ({when})
    EXECUTE FUNCTION jobq.after_job_state_change()
"""
_WHEN = "NEW.has_dependents OR NEW.notify_finish"
_OLD_WHEN = """OLD.state IS DISTINCT FROM NEW.state AND (NEW.has_dependents OR NEW.notify_finish)
          AND (NEW.state IN ('succeeded', 'failed', 'cancelled')
               OR OLD.state IN ('failed', 'cancelled'))"""


def _adds(checks: dict[str, str]) -> str:
    return ", ".join(f"ADD CONSTRAINT {name} CHECK ({test})" for name, test in checks.items())


def upgrade() -> None:
    drops = ", ".join(f"DROP CONSTRAINT {name}" for name in _RANGE_CHECKS)
    op.execute(f"ALTER TABLE jobq.jobs {drops}")
    op.execute(f"ALTER TABLE jobq.enqueue_limits {_adds(_LIMITS_CHECKS)}")
    op.execute(_FUNCTION.format(guard=_GUARD))
    op.execute("DROP TRIGGER jobs_settle_dependents ON jobq.jobs")
    op.execute(_TRIGGER.format(when=_WHEN))


def downgrade() -> None:
    op.execute("DROP TRIGGER jobs_settle_dependents ON jobq.jobs")
    op.execute(_TRIGGER.format(when=_OLD_WHEN))
    op.execute(_FUNCTION.format(guard=""))
    drops = ", ".join(f"DROP CONSTRAINT {name}" for name in _LIMITS_CHECKS)
    op.execute(f"ALTER TABLE jobq.enqueue_limits {drops}")
    op.execute(f"ALTER TABLE jobq.jobs {_adds(_RANGE_CHECKS)}")
