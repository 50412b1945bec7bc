"""Fair queues: fairness keys, the fair claim's keys, rate limits per key, priority aging.

- `jobq.jobs.fairness_key` (a tenant, say), with `jobs_fair_claim_idx`: a key's queued
  jobs in claim order (only jobs with a key are in it: a fifo queue's keyless jobs pay
  nothing).
- `jobq.queues.ordering` (`fifo`, today's claim, or `fair`), `fair_weights` (key →
  weight), `rate_limit_per_key_jobs` per `rate_limit_per_key_seconds`, and
  `aging_seconds`/`aging_max` (+1 priority per `aging_seconds` waited, at most
  `aging_max`); the last two need a fair queue, and a fair queue takes no
  `max_running_per_key` (its claim walks fairness keys, not concurrency keys). A fair
  queue is `limited`: its leases take turns on its row, as a limited queue's do.
- `jobq.fair_keys`: a row per (fair queue, key) while the key has queued jobs, holding
  its pass (stride scheduling: the claim advances it by 1/weight per job leased). Made by
  a trigger when a job is queued (enqueued, retried, released by its parents), dropped
  by the claim through `jobq.forget_fair_key` once the key has none.
- `jobq.sync_fair_keys(queue)`: what a change of ordering runs in its transaction (a fair
  queue's keys get their rows, its keyless jobs the key ''; a fifo queue's rows go).
- `jobq.fair_key_rate_log`: the leases of keys of queues with `rate_limit_per_key`, a row
  per key per lease call, kept for one window (the claim prunes it).
- `jobq.insert_jobs` and `jobq.enqueue` take the fairness key (new signatures: dropped
  and made again, with their grants), `jobq.enqueue_many` reads it from each item. A job
  without one in a fair queue has the key '' (the keyless jobs share one turn).
- PUBLIC loses EXECUTE on the schema's functions again, as in 0021 (0025's had it by
  default): producers keep the two enqueue functions, the service's roles all of them.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import statements

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0026_fair_queues.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def _functions_of_0023(*names: str) -> list[str]:
    """Migration 0023's statements that make these functions, as `CREATE OR REPLACE`."""
    path = Path(__file__).with_name("0023_one_enqueue.sql")
    found = []
    for statement in statements(path.read_text(encoding="utf-8")):
        lines = statement.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments above it
        code = "\n".join(lines).replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", 1)
        if any(code.startswith(f"CREATE FUNCTION jobq.{name}(") for name in names):
            found.append(code.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    return found


_GRANTS_0023 = """
DO $$
DECLARE
    grantee text;
BEGIN
    REVOKE EXECUTE ON FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[],
        timestamptz[], double precision[], integer[], integer[], text[], jsonb[], text[],
        integer, integer, integer[], boolean[], jsonb[]) FROM PUBLIC;
    REVOKE EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
        double precision, integer, integer, text, jsonb, bigint[], text, text, text[],
        text[]) FROM PUBLIC;
    FOR grantee IN
        SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
         WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs' AND g.grantee <> 'PUBLIC'
           AND g.grantee::text <> current_user
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION jobq.insert_jobs(text, text[], jsonb[], '
                       'integer[], timestamptz[], double precision[], integer[], integer[], '
                       'text[], jsonb[], text[], integer, integer, integer[], boolean[], '
                       'jsonb[]) TO %I', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, '
                       'timestamptz, double precision, integer, integer, text, jsonb, '
                       'bigint[], text, text, text[], text[]) TO %I', grantee);
    END LOOP;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text, text[],
            text[]) TO jobq_producer;
    END IF;
END
$$
"""


def downgrade() -> None:
    for statement in statements(
        """
        DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
            integer, integer, text, jsonb, bigint[], text, text, text[], text[], text);
        DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[],
            double precision[], integer[], integer[], text[], jsonb[], text[], integer,
            integer, integer[], boolean[], jsonb[], text[]);
        DROP TRIGGER jobs_fair_key_requeued ON jobq.jobs;
        DROP TRIGGER jobs_fair_key_inserted ON jobq.jobs;
        DROP FUNCTION jobq.fair_key_queued();
        DROP FUNCTION jobq.forget_fair_key(text, text);
        DROP FUNCTION jobq.check_fairness_key(text, text);
        DROP FUNCTION jobq.sync_fair_keys(text);
        DROP TABLE jobq.fair_key_rate_log;
        DROP TABLE jobq.fair_keys;
        DROP INDEX jobq.jobs_fair_claim_idx;
        ALTER TABLE jobq.jobs DROP COLUMN fairness_key;
        ALTER TABLE jobq.queues DROP COLUMN limited;
        ALTER TABLE jobq.queues
            DROP CONSTRAINT fair_ordering_without_max_running_per_key,
            DROP CONSTRAINT fair_limits_need_fair_ordering,
            DROP CONSTRAINT aging_whole, DROP CONSTRAINT rate_limit_per_key_whole,
            DROP COLUMN ordering, DROP COLUMN fair_weights,
            DROP COLUMN rate_limit_per_key_jobs, DROP COLUMN rate_limit_per_key_seconds,
            DROP COLUMN aging_seconds, DROP COLUMN aging_max;
        ALTER TABLE jobq.queues
            ADD COLUMN limited boolean GENERATED ALWAYS AS (
                max_running IS NOT NULL OR max_running_per_key IS NOT NULL
                OR rate_limit_jobs IS NOT NULL) STORED;
        """
    ):
        op.execute(statement)
    for statement in _functions_of_0023("insert_jobs", "enqueue", "enqueue_many"):
        op.execute(statement)
    op.execute(_GRANTS_0023)
