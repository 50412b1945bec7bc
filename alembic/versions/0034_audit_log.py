"""The audit log: one row per admin action, and per refused attempt at one.

- `jobq.audit_log`: who (`key_name`: the API key's name; NULL when the service runs
  open or the key was not recognised), what (`action`: the route's operation id,
  `method`, `path`, and the targets the request names: `queue`, `job_id`, `target`
  for a key, schedule or subscription name; `detail`: a bounded summary of the body,
  never a payload or a secret), when (`at`), the outcome (`status`, the HTTP status)
  and the request id. Read newest first by `id` (its primary key); `at` serves
  retention's oldest-first deletes.

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE jobq.audit_log (
            id bigserial PRIMARY KEY,
            at timestamptz NOT NULL DEFAULT now(),
            key_name text,
            action text NOT NULL,
            method text NOT NULL,
            path text NOT NULL,
            queue text,
            job_id bigint,
            target text,
            detail jsonb NOT NULL DEFAULT '{}',
            status smallint NOT NULL,
            request_id text NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX audit_log_at ON jobq.audit_log (at)")
    op.execute(
        "COMMENT ON TABLE jobq.audit_log IS"
        " 'Who did which admin action when, and how it ended; refused attempts too.'"
    )


def downgrade() -> None:
    op.execute("DROP TABLE jobq.audit_log")
