"""A fair queue's lease in one round trip: `jobq.lease_fair`.

A fair queue's leases take turns on its settings row, so the time each holds the row
bounds the queue's drain. Leased as a limited queue is, a lease held it for four round
trips (BEGIN, the lock, the claim, COMMIT) and the waits of its service process between
them. This function takes the row and claims in one call, run on its own: the row is
held for the claim and the commit only. Its claim is lease_fair's (app/jobs/lease.sql,
which calls it) with the lease's time taken after the lock, as that statement's
`statement_timestamp()` was (here it would be the calling statement's, from before the
wait for the row), and with fewer keys than the lease wants, each key read only as far
as its share of it (docs/flow-control.md), with a second look when one falls short.
A fair queue without limits commits its lease without waiting for the WAL flush, as
the plain lease does.

Revision ID: 0044
Revises: 0043
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0044"
down_revision = "0043"
branch_labels = None
depends_on = None

_SIGNATURE = "jobq.lease_fair(text, text[], integer, integer, text, bigint)"

_FUNCTION = """
CREATE FUNCTION jobq.lease_fair(queue text, types text[], max_jobs integer,
                                lease_seconds integer, worker_id text, key_id bigint)
RETURNS SETOF jobq.jobs
LANGUAGE plpgsql VOLATILE
-- planning the claim anew cost more than running it: its generic plan, without JIT
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    unlimited boolean;
    locked_at timestamptz;
BEGIN
    -- the leases of one fair queue take turns on its row; none of a paused queue, nor
    -- of one that is no longer fair (the caller's list of fair queues was stale)
    SELECT q.max_running IS NULL AND q.rate_limit_jobs IS NULL
           AND q.rate_limit_per_key_jobs IS NULL
      INTO unlimited
      FROM jobq.queues q
     WHERE q.name = lease_fair.queue AND q.limited AND q.ordering = 'fair'
       AND NOT q.paused
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF unlimited THEN
        -- as the plain lease: commit without waiting for the WAL flush (a lease lost
        -- to a crash leaves its jobs queued, and its worker's finish is refused); not
        -- under a limit, which a lost lease's jobs, run meanwhile, would go past
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    -- the claim's snapshot is taken after the lock: it sees every lease before it
    locked_at := clock_timestamp();
    RETURN QUERY
    WITH RECURSIVE settings AS MATERIALIZED (
        SELECT q.max_running, q.rate_limit_jobs, q.rate_limit_seconds, q.fair_weights,
               q.rate_limit_per_key_jobs AS key_jobs, q.rate_limit_per_key_seconds AS key_seconds,
               q.aging_seconds, q.aging_max
          FROM jobq.queues q
         WHERE q.name = lease_fair.queue AND q.ordering = 'fair'
    ),
    room AS MATERIALIZED (
        SELECT greatest(0, least(
                   CAST(lease_fair.max_jobs AS integer),
                   s.max_running - CASE WHEN s.max_running IS NOT NULL THEN (
                       SELECT count(*) FROM jobq.jobs j
                        WHERE j.state = 'running' AND j.queue = lease_fair.queue) END,
                   s.rate_limit_jobs - (
                       SELECT coalesce(sum(r.jobs), 0)
                         FROM jobq.queue_rate_log r
                        WHERE r.queue = lease_fair.queue
                          AND r.at > locked_at
                                     - make_interval(secs => s.rate_limit_seconds)))) AS n
          FROM settings s
    ),
    walk(key, pass, weight, room, due, idle, found) AS (
        -- before the first key: no key has a pass of -Infinity
        SELECT '', CAST('-Infinity' AS double precision), CAST(1 AS double precision),
               CAST(0 AS bigint), false, false, 0
         WHERE (SELECT n FROM room) > 0
        UNION ALL
        SELECT nxt.key, nxt.pass, nxt.weight, p.room, p.room > 0 AND p.due,
               NOT p.due AND (
                   SELECT true FROM jobq.jobs j
                    WHERE j.queue = lease_fair.queue
                      AND j.fairness_key >= nxt.key AND j.fairness_key <= nxt.key
                      AND j.state = 'queued'
                    ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                    LIMIT 1) IS NULL,
               w.found + CAST(p.room > 0 AND p.due AS integer)
          FROM walk w
         CROSS JOIN LATERAL (
                SELECT k.key, k.pass,
                       coalesce(CAST(s.fair_weights ->> k.key AS double precision), 1) AS weight
                  FROM jobq.fair_keys k CROSS JOIN settings s
                 WHERE k.queue = lease_fair.queue AND (k.pass, k.key) > (w.pass, w.key)
                 ORDER BY k.pass, k.key
                 LIMIT 1
               ) AS nxt
         CROSS JOIN LATERAL (
                SELECT CASE WHEN s.key_jobs IS NULL THEN (SELECT n FROM room)
                            ELSE s.key_jobs - (
                                SELECT coalesce(sum(r.jobs), 0)
                                  FROM jobq.fair_key_rate_log r
                                 WHERE r.queue = lease_fair.queue AND r.key = nxt.key
                                   AND r.at > locked_at
                                              - make_interval(secs => s.key_seconds)) END
                           AS room,
                       coalesce((
                           SELECT true FROM jobq.jobs j
                            WHERE j.queue = lease_fair.queue
                              AND j.fairness_key >= nxt.key AND j.fairness_key <= nxt.key
                              AND j.state = 'queued' AND j.run_at <= locked_at
                              AND (j.start_by IS NULL OR j.start_by > locked_at)
                              AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                   OR j.type = ANY(CAST(lease_fair.types AS text[])))
                            ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                            LIMIT 1), false) AS due
                  FROM settings s
                OFFSET 0  -- each probe once (not once for each place that names it)
               ) AS p
         WHERE w.found < (SELECT n FROM room)
    ),
    keys AS MATERIALIZED (
        SELECT w.key, w.pass, w.weight, w.room FROM walk w WHERE w.due
    ),
    horizon AS MATERIALIZED (
        -- no job whose turn comes after this one is picked: when the walk found enough
        -- keys with due jobs, the pass of the last (each key's first job is earlier);
        -- with fewer, without aging, the turn by which their jobs have max_jobs turns in
        -- all (each key has at least (turn - pass) * weight of them), unless one runs
        -- out of jobs before (then a second look, below); with aging, none
        SELECT CASE WHEN count(*) >= (SELECT n FROM room) THEN max(pass)
                    WHEN (SELECT aging_seconds FROM settings) IS NULL
                    THEN max(pass) + (SELECT n FROM room) / sum(weight)
                    ELSE CAST('Infinity' AS double precision) END AS pass
          FROM keys
    ),
    shares AS MATERIALIZED (
        -- each key's best due jobs, as many as it has turns up to the horizon
        SELECT c.id, k.key, k.pass + (c.nth - 1) / k.weight AS turn, wanted.n AS share,
               least(k.room, (SELECT n FROM room)) AS most
          FROM keys k
         CROSS JOIN settings s
         CROSS JOIN LATERAL (
                SELECT CAST(least(CAST(k.room AS double precision), (SELECT n FROM room),
                                  1 + floor(((SELECT pass FROM horizon) - k.pass) * k.weight))
                            AS integer) AS n
               ) AS wanted
         CROSS JOIN LATERAL (
                -- without aging: the key's best due jobs along jobs_fair_claim_idx, in order
                SELECT x.id, row_number() OVER () AS nth
                  FROM (SELECT j.id
                           FROM jobq.jobs j
                          WHERE s.aging_seconds IS NULL
                            AND j.queue = lease_fair.queue
                            AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                            AND j.state = 'queued' AND j.run_at <= locked_at
                            AND (j.start_by IS NULL OR j.start_by > locked_at)
                            AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                 OR j.type = ANY(CAST(lease_fair.types AS text[])))
                          ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                          LIMIT wanted.n) AS x
                UNION ALL
                -- with aging: the longest-waiting due jobs of each priority in use, best first
                SELECT x.id, row_number() OVER (ORDER BY x.effective DESC, x.run_at, x.id) AS nth
                  FROM (WITH RECURSIVE levels(priority) AS (
                             (SELECT j.priority FROM jobq.jobs j
                               WHERE s.aging_seconds IS NOT NULL
                                 AND j.queue = lease_fair.queue
                                 AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                 AND j.state = 'queued'
                               ORDER BY j.fairness_key, j.priority DESC LIMIT 1)
                             UNION ALL
                             SELECT (SELECT j.priority FROM jobq.jobs j
                                      WHERE j.queue = lease_fair.queue
                                        AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                        AND j.state = 'queued' AND j.priority < l.priority
                                      ORDER BY j.fairness_key, j.priority DESC LIMIT 1)
                               FROM levels l
                              WHERE l.priority IS NOT NULL
                         )
                         SELECT o.id, o.effective, o.run_at
                           FROM levels l
                          CROSS JOIN LATERAL (
                                 SELECT j.id, j.run_at,
                                        j.priority + least(s.aging_max, floor(
                                            extract(epoch FROM now() - j.run_at)
                                            / s.aging_seconds)) AS effective
                                   FROM jobq.jobs j
                                  WHERE j.queue = lease_fair.queue
                                    AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                    AND j.state = 'queued' AND j.priority = l.priority
                                    AND j.run_at <= locked_at
                                    AND (j.start_by IS NULL OR j.start_by > locked_at)
                                    AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                         OR j.type = ANY(CAST(lease_fair.types AS text[])))
                                  ORDER BY j.fairness_key, j.run_at, j.id
                                  LIMIT wanted.n
                                ) AS o
                          WHERE l.priority IS NOT NULL
                          ORDER BY o.effective DESC, o.run_at, o.id
                          LIMIT wanted.n) AS x
               ) AS c
    ),
    again AS MATERIALIZED (
        -- the shares fell short of the lease, and a key that gave its whole share may
        -- have more: look again, without the horizon
        SELECT count(*) < (SELECT n FROM room) AND EXISTS (
                   SELECT FROM shares s
                    GROUP BY s.key, s.share, s.most
                   HAVING count(*) = s.share AND s.share < s.most) AS needed
          FROM shares
    ),
    candidates AS (
        SELECT s.id, s.key, s.turn FROM shares s WHERE NOT (SELECT needed FROM again)
        UNION ALL
        -- the second look (aging has no horizon: never)
        SELECT c.id, k.key, k.pass + (c.nth - 1) / k.weight AS turn
          FROM keys k
         CROSS JOIN LATERAL (
                SELECT x.id, row_number() OVER () AS nth
                  FROM (SELECT j.id
                           FROM jobq.jobs j
                          WHERE j.queue = lease_fair.queue
                            AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                            AND j.state = 'queued' AND j.run_at <= locked_at
                            AND (j.start_by IS NULL OR j.start_by > locked_at)
                            AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                 OR j.type = ANY(CAST(lease_fair.types AS text[])))
                          ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                          LIMIT least(k.room, (SELECT n FROM room))) AS x
               ) AS c
         WHERE (SELECT needed FROM again)
    ),
    picked AS (
        SELECT id, key FROM candidates ORDER BY turn, key LIMIT (SELECT n FROM room)
    ),
    leased AS (
        UPDATE jobq.jobs j
           -- lease.sql's claim fragment, its time taken after the lock
           SET state = 'running',
               attempt = j.attempt + 1,
               lease_id = gen_random_uuid(),
               current_lease_seconds = least(coalesce(lease_fair.lease_seconds, j.lease_seconds),
                                             j.timeout_seconds),
               lease_expires_at = locked_at + make_interval(
                   secs => least(coalesce(lease_fair.lease_seconds, j.lease_seconds),
                                 j.timeout_seconds)),
               worker_id = lease_fair.worker_id,
               lease_key_id = lease_fair.key_id,
               attempted_at = locked_at,
               started_at = coalesce(j.started_at, locked_at),
               updated_at = locked_at
         WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND j.state::text = 'queued'
        RETURNING j.*
    ),
    moves AS MATERIALIZED (
        -- each key leased from takes its turns; each key passed over goes behind the walk
        SELECT w.key,
               CASE WHEN p.jobs IS NOT NULL THEN w.pass + p.jobs / w.weight
                    ELSE greatest(w.pass + 1 / w.weight, (SELECT max(pass) FROM walk)) END AS pass
          FROM walk w
          LEFT JOIN (SELECT key, count(*) AS jobs FROM picked GROUP BY key) AS p ON p.key = w.key
         WHERE NOT w.idle AND w.pass > CAST('-Infinity' AS double precision)
           AND (p.jobs IS NOT NULL OR NOT w.due)
    ),
    turns AS (
        -- by primary key, the keys moved only (a join let a plan walk every key of the queue)
        UPDATE jobq.fair_keys f
           SET pass = (SELECT m.pass FROM moves m WHERE m.key = f.key)
         WHERE f.queue = lease_fair.queue AND f.key = ANY(ARRAY(SELECT key FROM moves))
        RETURNING 1
    ),
    forgotten AS (
        SELECT jobq.forget_fair_key(lease_fair.queue, w.key) FROM walk w WHERE w.idle
    ),
    logged AS (
        INSERT INTO jobq.queue_rate_log (queue, at, jobs)
        SELECT lease_fair.queue, locked_at, count(*)
          FROM leased
        HAVING count(*) > 0 AND (SELECT rate_limit_jobs FROM settings) IS NOT NULL
        RETURNING 1
    ),
    key_logged AS (
        INSERT INTO jobq.fair_key_rate_log (queue, key, at, jobs)
        SELECT lease_fair.queue, l.fairness_key, locked_at, count(*)
          FROM leased l
         WHERE (SELECT key_jobs FROM settings) IS NOT NULL
         GROUP BY l.fairness_key
        RETURNING 1
    ),
    forgotten_leases AS (
        DELETE FROM jobq.queue_rate_log r
         USING settings s
         WHERE r.queue = lease_fair.queue AND s.rate_limit_jobs IS NOT NULL
           AND r.at <= locked_at - make_interval(secs => s.rate_limit_seconds)
        RETURNING 1
    ),
    forgotten_key_leases AS (
        DELETE FROM jobq.fair_key_rate_log r
         USING settings s
         WHERE r.queue = lease_fair.queue AND s.key_jobs IS NOT NULL
           AND r.at <= locked_at - make_interval(secs => s.key_seconds)
        RETURNING 1
    )
    SELECT leased.*
      FROM leased
     -- a condition on no row: evaluated first, whether or not a job was leased
     WHERE (SELECT count(*) FROM forgotten) >= 0;
END
$$
"""


def upgrade() -> None:
    op.execute(_FUNCTION)
    op.execute(
        f"COMMENT ON FUNCTION {_SIGNATURE} IS"
        " 'Lease up to max_jobs due jobs of one fair queue, taking turns across its keys.'"
    )
    op.execute(f"REVOKE EXECUTE ON FUNCTION {_SIGNATURE} FROM PUBLIC")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {_SIGNATURE}")
