"""`jobq.forget_fair_key` names the key as a range, so that only jobs_fair_claim_idx
answers its probe.

0028 made the probe ask for the key's first queued job in jobs_fair_claim_idx's order,
but with `fairness_key = key` the planner drops that column from the order (it is
fixed), and jobs_claim_idx (queue, priority, run_at) gives the rest: behind one
tenant's 200,000 queued jobs each call scanned them all (92 ms) to find an idle key had
none. `fairness_key >= key AND fairness_key <= key` is the same rows and keeps the
column in the order, which only jobs_fair_claim_idx gives (0.03 ms); lease_fair's probes
are written the same way (app/jobs/lease.sql).

Revision ID: 0042
Revises: 0041
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0042"
down_revision = "0041"
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
       AND (SELECT true FROM jobq.jobs j
                     WHERE j.queue = k.queue AND {key}
                       AND j.state = 'queued'
                     ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                     LIMIT 1) IS NULL;
    RETURN FOUND;
END
$$
"""


def upgrade() -> None:
    op.execute(_FUNCTION.format(key="j.fairness_key >= k.key AND j.fairness_key <= k.key"))


def downgrade() -> None:
    op.execute(_FUNCTION.format(key="j.fairness_key = k.key"))
