"""A job's W3C trace context: the producer's `traceparent` and `tracestate`.

- `jobs.traceparent` and `jobs.tracestate` (NULL: none): the trace context a producer
  enqueued the job in, stored as given and handed to its worker with each lease, so
  that the worker's span of the job continues the producer's trace.
- `jobq.check_trace` refuses a malformed one as the API does (W3C Trace Context);
  `jobq.check_trace_of`, a batch item's `trace` object.
- `jobq.insert_jobs` takes `traceparents` and `tracestates` (named, after the others);
  `jobq.enqueue` takes `traceparent` and `tracestate`; `jobq.enqueue_many` reads each
  item's `trace` (new signatures: dropped and made again, with their grants).

Revision ID: 0037
Revises: 0036
Create Date: 2026-11-28
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

from app.db.sqlscript import functions_created, statements

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

SQL = Path(__file__).with_name("0037_trace_context.sql")


def upgrade() -> None:
    for statement in statements(SQL.read_text(encoding="utf-8")):
        op.execute(statement)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision, "
        "integer, integer, text, jsonb, bigint[], text, text, text[], text[], text, text, "
        "integer, text[], text, integer, timestamptz, text, text)"
    )
    op.execute(
        "DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[], "
        "double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer, "
        "integer[], boolean[], jsonb[], text[], jsonb[], integer[], timestamptz[], text[], "
        "text[])"
    )
    # the functions as 0030 left them, and their grants
    script = SQL.with_name("0030_job_lifecycle.sql").read_text(encoding="utf-8")
    for statement in functions_created(script, "insert_jobs", "enqueue"):
        op.execute(statement)
    for statement in functions_created(script, "enqueue_many"):
        op.execute(statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute("DROP FUNCTION jobq.check_trace_of(jsonb, text)")
    op.execute("DROP FUNCTION jobq.check_trace(text, text, text)")
    op.execute("ALTER TABLE jobq.jobs DROP COLUMN traceparent, DROP COLUMN tracestate")
    for statement in statements(
        """
        DO $$
        DECLARE
            function regprocedure;
            grantee text;
        BEGIN
            FOR function IN
                SELECT p.oid::regprocedure FROM pg_proc p
                 WHERE p.pronamespace = 'jobq'::regnamespace
                   AND p.proname IN ('insert_jobs', 'enqueue', 'enqueue_many')
            LOOP
                EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', function);
                FOR grantee IN
                    SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
                     WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs'
                       AND g.grantee <> 'PUBLIC' AND g.grantee::text <> current_user
                LOOP
                    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', function, grantee);
                END LOOP;
            END LOOP;
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
                GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
                    double precision, integer, integer, text, jsonb, bigint[], text, text,
                    text[], text[], text, text, integer, text[], text, integer, timestamptz)
                    TO jobq_producer;
                GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb, text[], text[])
                    TO jobq_producer;
            END IF;
        END
        $$;
        """
    ):
        op.execute(statement)
