"""`jobq.forget_fair_key` looks for a key's queued jobs along jobs_fair_claim_idx.

Its `NOT EXISTS` let the planner scan the jobs table when statistics saw one tenant's
flood (every key looked as common as that tenant, so a scan seemed sure to find a job at
once): a second a call behind 200,000 jobs of another key. It now asks for the key's
first queued job in that index's order, which only the index gives.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION jobq.forget_fair_key(queue text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext(forget_fair_key.queue),
                                     hashtext(forget_fair_key.key)) THEN
        RETURN false;
    END IF;
    DELETE FROM jobq.fair_keys k
     WHERE k.queue = forget_fair_key.queue AND k.key = forget_fair_key.key
       AND {idle};
    RETURN FOUND;
END
$$
"""
_BY_INDEX = """(SELECT true FROM jobq.jobs j
                     WHERE j.queue = k.queue AND j.fairness_key = k.key
                       AND j.state = 'queued'
                     ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                     LIMIT 1) IS NULL"""
_EXISTS = """NOT EXISTS (SELECT FROM jobq.jobs j
                        WHERE j.queue = k.queue AND j.fairness_key = k.key
                          AND j.state = 'queued')"""


def upgrade() -> None:
    op.execute(_FUNCTION.format(idle=_BY_INDEX))


def downgrade() -> None:
    op.execute(_FUNCTION.format(idle=_EXISTS))
