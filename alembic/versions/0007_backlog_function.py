"""Count a queue's backlog in a function, so the enqueue statement keeps a cached plan.

Admission control counts a queue's unfinished jobs (up to its `max_backlog`) inside
the enqueue statement. Written inline, those two counts made the planner's estimate of
a generic plan look far costlier than a plan made for each call's values, so
PostgreSQL planned the statement afresh on every enqueue (~0.5 ms of its CPU). Behind
a PL/pgSQL function the planner sees one cheap call, keeps the generic plan, and the
function's own two index scans are planned once per connection.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION jobq.queue_backlog(queue_name text, up_to integer)
        RETURNS bigint
        LANGUAGE plpgsql STABLE
        AS $$
        BEGIN
            -- The claim index holds the queued jobs, the lease-expiry index the running
            -- ones: each count reads at most `up_to` index entries.
            RETURN (SELECT count(*) FROM (SELECT FROM jobq.jobs
                                           WHERE queue = queue_name AND state = 'queued'
                                           LIMIT up_to) AS queued)
                 + (SELECT count(*) FROM (SELECT FROM jobq.jobs
                                           WHERE queue = queue_name AND state = 'running'
                                           LIMIT up_to) AS running);
        END
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION jobq.queue_backlog(text, integer)")
