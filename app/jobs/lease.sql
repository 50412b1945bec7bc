-- Lease: claim due jobs for a worker, from any queues, one queue, or a limited queue
-- (whose leases take turns on its settings row), and what a waiting lease looks up.
-- The claim is `SELECT … FOR UPDATE SKIP LOCKED` inside a CTE feeding an
-- `UPDATE … RETURNING`: one statement. `:key_id` is the caller's API key (NULL:
-- authentication is off).


-- fragment: claim
-- What every claim sets on the jobs it took (`j`): running, their next attempt, a new
-- lease of `lease_seconds` (NULL: each job's own) for the worker and key, as of when
-- the statement began: for lease and lease_queue, each its own transaction, that is
-- their now(); for lease_limited, after its lock (its transaction began waiting). A
-- job's timeout is the longest its lease may last (least() passes over a NULL one).
   SET state = 'running',
       attempt = j.attempt + 1,
       lease_id = gen_random_uuid(),
       current_lease_seconds = least(coalesce(:lease_seconds, j.lease_seconds),
                                     j.timeout_seconds),
       lease_expires_at = statement_timestamp() + make_interval(
           secs => least(coalesce(:lease_seconds, j.lease_seconds), j.timeout_seconds)),
       worker_id = :worker_id,
       lease_key_id = :key_id,
       attempted_at = statement_timestamp(),
       started_at = coalesce(j.started_at, statement_timestamp()),
       updated_at = statement_timestamp()


-- name: lease
-- Claim up to `max_jobs` due jobs from the given queues, best priority first, for one
-- worker (and the API key it used).
WITH active AS (
    -- paused queues are skipped (admin: pause/resume), and limited ones (lease_limited
    -- takes those); a queue without a row is active
    SELECT q.name
      FROM unnest(CAST(:queues AS text[])) AS q(name)
     WHERE NOT EXISTS (SELECT FROM jobq.queues p
                        WHERE p.name = q.name AND (p.paused OR p.limited))
),
picked AS (
    SELECT c.id
      FROM active AS q
     CROSS JOIN LATERAL (
            SELECT id, priority, run_at
              FROM jobq.jobs
             WHERE state = 'queued' AND queue = q.name AND run_at <= now()
               AND (start_by IS NULL OR start_by > statement_timestamp())
               AND (cardinality(CAST(:types AS text[])) = 0
                    OR type = ANY(CAST(:types AS text[])))
             ORDER BY priority DESC, run_at, id
             LIMIT :max_jobs
               FOR UPDATE SKIP LOCKED
           ) c
     ORDER BY c.priority DESC, c.run_at, c.id
     LIMIT :max_jobs
)
UPDATE jobq.jobs j
{claim}
 -- By primary key whatever the plan: a join to `picked` let a plan cached for small
 -- statistics merge-join along jobs_pkey from its first row.
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
   -- This transaction only (is_local): commit without waiting for the WAL flush. A
   -- lease lost to a PostgreSQL crash leaves its job queued, and the worker's finish
   -- is refused (the lease is unknown): at least once still holds. Any later
   -- durable commit (an enqueue, a finish) flushes this one first.
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING j.*;


-- name: lease_queue
-- `lease` from one queue, the usual call, written so that PostgreSQL can keep one plan for
-- it: no array of queues, whose length a cached plan cannot know (it assumes ten), and a
-- LIMIT the repository writes in as the batch size, a statement per size (a cached plan
-- takes a `$n` limit for a tenth of the queue). Otherwise `lease`, whose UPDATE this is.
WITH picked AS (
    SELECT id
      FROM jobq.jobs
     WHERE state = 'queued' AND queue = :queue AND run_at <= now()
       -- a job past its start deadline is never leased (the reaper expires it)
       AND (start_by IS NULL OR start_by > statement_timestamp())
       AND (cardinality(CAST(:types AS text[])) = 0
            OR type = ANY(CAST(:types AS text[])))
       -- a paused or limited queue gives nothing here (as in `lease`)
       AND NOT EXISTS (SELECT FROM jobq.queues p
                        WHERE p.name = :queue AND (p.paused OR p.limited))
     ORDER BY priority DESC, run_at, id
     LIMIT :max_jobs
       FOR UPDATE SKIP LOCKED
)
UPDATE jobq.jobs j
{claim}
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING j.*;


-- ---- limited queues (max_running, max_running_per_key, rate limit) --------------------


-- name: lock_limited_queue
-- Take a limited queue's settings row for this lease's transaction: the leases of one
-- limited queue take turns here, on every replica, so that each one's claim (the next
-- statement, with a snapshot taken after the lock) counts what the one before leased.
-- No row: the queue is not limited (any more). A fair queue is leased by lease_fair
-- (the service calls it alone for the fair queues it knows; here for one that became
-- fair since: the function takes the row again, which this transaction holds).
SELECT paused, ordering = 'fair' AS fair
  FROM jobq.queues
 WHERE name = :queue AND limited
   FOR UPDATE;


-- name: lease_limited
-- Claim up to `max_jobs` due jobs from one limited queue, its row locked by
-- lock_limited_queue in this transaction, no more than its limits leave: `max_running`
-- less the jobs running now; the rate limit less the jobs leased in its window; and for
-- each concurrency key, `max_running_per_key` less that key's running jobs. Keys with
-- due jobs are walked one by one along jobs_key_claim_idx, so a key at its limit never
-- hides the next key's jobs. A lease of a rate-limited queue is logged in jobq.queue_rate_log,
-- whose rows older than the window go in the same statement. Times are this statement's
-- (statement_timestamp(), after the lock), not the transaction's, which began waiting
-- for the lock: the leases of one queue take turns, so their times are in order, and a
-- job enqueued while this one waited is due (as in lease_fair, where a key whose jobs
-- all looked not yet due would go behind the others).
WITH RECURSIVE settings AS MATERIALIZED (
    SELECT q.max_running, q.max_running_per_key, q.rate_limit_jobs, q.rate_limit_seconds
      FROM jobq.queues q
     WHERE q.name = :queue
),
running AS MATERIALIZED (
    SELECT j.concurrency_key, count(*) AS n
      FROM jobq.jobs j
     WHERE j.state = 'running' AND j.queue = :queue
     GROUP BY j.concurrency_key
),
room AS MATERIALIZED (
    SELECT greatest(0, least(
               CAST(:max_jobs AS integer),
               s.max_running - (SELECT coalesce(sum(n), 0) FROM running),
               s.rate_limit_jobs - (
                   SELECT coalesce(sum(r.jobs), 0)
                     FROM jobq.queue_rate_log r
                    WHERE r.queue = :queue
                      AND r.at > statement_timestamp()
                                 - make_interval(secs => s.rate_limit_seconds)))) AS n,
           s.max_running_per_key AS per_key
      FROM settings s
),
keys AS (
    -- the queue's concurrency keys with due jobs, when it limits them (a key whose jobs
    -- are all delayed is passed over inside the index, not visited: run_at is in it)
    (SELECT j.concurrency_key AS k
       FROM jobq.jobs j
      WHERE j.queue = :queue AND j.state = 'queued' AND j.concurrency_key IS NOT NULL
        AND j.run_at <= statement_timestamp()
        AND (SELECT per_key FROM room) IS NOT NULL
      ORDER BY j.concurrency_key
      LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key
              FROM jobq.jobs j
             WHERE j.queue = :queue AND j.state = 'queued'
               AND j.concurrency_key > keys.k AND j.run_at <= statement_timestamp()
             ORDER BY j.concurrency_key
             LIMIT 1)
      FROM keys
     WHERE keys.k IS NOT NULL
),
candidates AS (
    -- each key's best due jobs, as many as the key may still run
    SELECT c.id, c.priority, c.run_at
      FROM keys
     CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.run_at
              FROM jobq.jobs j
             WHERE j.queue = :queue AND j.state = 'queued' AND j.concurrency_key = keys.k
               AND j.run_at <= statement_timestamp()
               AND (j.start_by IS NULL OR j.start_by > statement_timestamp())
               AND (cardinality(CAST(:types AS text[])) = 0
                    OR j.type = ANY(CAST(:types AS text[])))
             ORDER BY j.priority DESC, j.run_at, j.id
             LIMIT greatest(0, least(
                 (SELECT n FROM room),
                 (SELECT per_key FROM room) - coalesce(
                     (SELECT r.n FROM running r WHERE r.concurrency_key = keys.k), 0)))
           ) c
     WHERE keys.k IS NOT NULL
    UNION ALL
    -- jobs without a key (or every job, when keys are not limited): the queue's limits
    (SELECT j.id, j.priority, j.run_at
       FROM jobq.jobs j
      WHERE j.queue = :queue AND j.state = 'queued' AND j.run_at <= statement_timestamp()
        AND (j.concurrency_key IS NULL OR (SELECT per_key FROM room) IS NULL)
        AND (j.start_by IS NULL OR j.start_by > statement_timestamp())
        AND (cardinality(CAST(:types AS text[])) = 0
             OR j.type = ANY(CAST(:types AS text[])))
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT (SELECT n FROM room))
),
picked AS (
    SELECT id FROM candidates ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room)
),
leased AS (
    UPDATE jobq.jobs j
    {claim}
     -- `state::text`, as in finish_many: no cached plan walks every queued job
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND j.state::text = 'queued'
    RETURNING j.*
),
logged AS (
    INSERT INTO jobq.queue_rate_log (queue, at, jobs)
    SELECT :queue, statement_timestamp(), count(*)
      FROM leased
    HAVING count(*) > 0 AND (SELECT rate_limit_jobs FROM settings) IS NOT NULL
    RETURNING 1
),
forgotten AS (
    DELETE FROM jobq.queue_rate_log r
     USING settings s
     WHERE r.queue = :queue
       AND r.at <= statement_timestamp()
                   - make_interval(secs => coalesce(s.rate_limit_seconds, 0))
    RETURNING 1
)
SELECT leased.*
  FROM leased
 CROSS JOIN (SELECT count(*) FROM logged) AS logs
 CROSS JOIN (SELECT count(*) FROM forgotten) AS forgets;


-- name: limited_queue_state
-- What holds a limited queue back now (in the lease's transaction, after its claim):
-- running jobs against max_running, jobs leased in the rate window and when the oldest
-- of them leaves it, and whether a due job waits for its key.
SELECT q.max_running,
       (SELECT count(*) FROM jobq.jobs j
         WHERE j.state = 'running' AND j.queue = q.name) AS running,
       q.rate_limit_jobs,
       w.used AS rate_used,
       CAST(extract(epoch FROM w.oldest + make_interval(secs => q.rate_limit_seconds))
            AS double precision) AS rate_frees_at,
       q.max_running_per_key IS NOT NULL AND EXISTS (
           SELECT FROM (SELECT r.concurrency_key
                          FROM jobq.jobs r
                         WHERE r.state = 'running' AND r.queue = q.name
                           AND r.concurrency_key IS NOT NULL
                         GROUP BY r.concurrency_key
                        HAVING count(*) >= q.max_running_per_key) AS full_keys
            WHERE EXISTS (SELECT FROM jobq.jobs d
                           WHERE d.queue = q.name AND d.state = 'queued'
                             AND d.concurrency_key = full_keys.concurrency_key
                             AND d.run_at <= now())) AS key_held,
       false AS key_rate_held  -- a fair queue's (fair_queue_state)
  FROM jobq.queues q
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(r.jobs), 0) AS used, min(r.at) AS oldest
          FROM jobq.queue_rate_log r
         WHERE r.queue = q.name
           AND r.at > clock_timestamp() - make_interval(secs => q.rate_limit_seconds)
       ) AS w
 WHERE q.name = :queue;


-- name: limited_queues
-- The queues whose leases go through lease_limited, whether finishing a job of one
-- frees room a waiting lease can take (a limit on running jobs: `slots`), and whether
-- it is fair (leased by lease_fair alone).
SELECT name, max_running IS NOT NULL OR max_running_per_key IS NOT NULL AS slots,
       ordering = 'fair' AS fair
  FROM jobq.queues
 WHERE limited;


-- name: announce_slots
-- Wake the leases waiting on these limited queues: jobs of theirs finished, freeing room.
SELECT jobq.announce_due(queue, now(), 1) FROM unnest(CAST(:queues AS text[])) AS queue;


-- name: next_due
-- The earliest run_at still ahead among each queue's queued jobs: what a process that
-- begins to hear announcements missed (jobs delayed or retried later while it did not).
-- A loose scan of jobs_claim_idx: one probe per priority in use, however many jobs wait.
SELECT q.name AS queue, extract(epoch FROM due.run_at) AS due_epoch
  FROM unnest(CAST(:queues AS text[])) AS q(name)
 CROSS JOIN LATERAL (
       WITH RECURSIVE levels(priority) AS (
           (SELECT priority FROM jobq.jobs
             WHERE state = 'queued' AND queue = q.name
             ORDER BY priority DESC LIMIT 1)
           UNION ALL
           SELECT (SELECT j.priority FROM jobq.jobs j
                    WHERE j.state = 'queued' AND j.queue = q.name AND j.priority < l.priority
                    ORDER BY j.priority DESC LIMIT 1)
             FROM levels l
            WHERE l.priority IS NOT NULL
       )
       SELECT min((SELECT j.run_at FROM jobq.jobs j
                    WHERE j.state = 'queued' AND j.queue = q.name
                      AND j.priority = l.priority AND j.run_at > now()
                    ORDER BY j.run_at LIMIT 1)) AS run_at
         FROM levels l
        WHERE l.priority IS NOT NULL
     ) due
 WHERE due.run_at IS NOT NULL;


-- name: record_leased_types
-- Note that jobs of these (queue, type) pairs were just leased (a pair at a time: the
-- arrays are parallel); what tells operators which types some worker serves.
INSERT INTO jobq.queue_types AS t (queue, type, last_leased_at)
SELECT pair.queue, pair.type, now()
  FROM unnest(CAST(:queues AS text[]), CAST(:types AS text[])) AS pair(queue, type)
    ON CONFLICT (queue, type) DO UPDATE
   SET last_leased_at = greatest(t.last_leased_at, excluded.last_leased_at);


-- ---- fair queues (round-robin across fairness keys) -----------------------------------


-- name: lease_fair
-- Claim up to `max_jobs` due jobs from one fair queue, taking turns across its fairness
-- keys (jobq.lease_fair, migration 0044): the function takes the queue's row, as
-- lock_limited_queue does, then claims with a snapshot taken after it, so one call
-- on its own holds the row for the claim and its commit only. Nothing when the queue
-- is paused or no longer a fair one (fair_queue_state tells which).
--
-- The claim is stride scheduling: each key has a pass (jobq.fair_keys) that a leased job
-- advances by 1/weight, and the jobs picked are the keys' best with the lowest turns (a
-- key's n-th job's turn is its pass + (n-1)/weight). The keys are walked by pass along
-- fair_keys_pass_idx until `max_jobs` of them have due jobs: a key passed over (jobs not
-- yet due, or at its `rate_limit_per_key`) moves behind the keys walked, and a key found
-- idle is forgotten (jobq.forget_fair_key), so neither is walked on every lease. Within a
-- key, best priority first: with aging, priority + 1 per `aging_seconds` waited since
-- run_at, at most + `aging_max`, found by a loose scan of the key's priorities in use.
-- Also within `max_running` and the queue's `rate_limit`, logged as in lease_limited.
-- Every look at a key's jobs names its key as a range (`>= key AND <= key`, never `=`)
-- and orders by `fairness_key` first (a probe is a LIMIT 1, not EXISTS, whose ORDER BY
-- the planner drops): only jobs_fair_claim_idx gives that order, so no plan scans past
-- another key's jobs. With `=` the planner drops the fixed column from the order, and
-- jobs_claim_idx (queue, priority, run_at) gives it too, walking past every other
-- key's jobs (figures: docs/flow-control.md).
SELECT *
  FROM jobq.lease_fair(:queue, CAST(:types AS text[]), CAST(:max_jobs AS integer),
                       CAST(:lease_seconds AS integer), :worker_id,
                       CAST(:key_id AS bigint));


-- name: fair_queue_state
-- limited_queue_state for a fair queue: running jobs against max_running, the queue's
-- rate window, and whether a due job waits for its key's `rate_limit_per_key`; when
-- the first window to free room ends (the queue's, or such a key's); and whether the
-- queue is paused, and still fair.
WITH held AS (
    -- keys at their rate limit with due jobs, and when their window's oldest lease leaves
    SELECT min(r.at) + make_interval(secs => min(q.rate_limit_per_key_seconds)) AS frees
      FROM jobq.fair_key_rate_log r
      JOIN jobq.queues q ON q.name = r.queue
     WHERE r.queue = :queue
       AND r.at > clock_timestamp() - make_interval(secs => q.rate_limit_per_key_seconds)
     GROUP BY r.key
    HAVING sum(r.jobs) >= min(q.rate_limit_per_key_jobs)
       AND EXISTS (SELECT FROM jobq.jobs d
                    WHERE d.queue = :queue
                      AND d.fairness_key >= r.key AND d.fairness_key <= r.key
                      AND d.state = 'queued' AND d.run_at <= now())
)
SELECT q.max_running,
       (SELECT count(*) FROM jobq.jobs j
         WHERE j.state = 'running' AND j.queue = q.name) AS running,
       q.rate_limit_jobs,
       w.used AS rate_used,
       CAST(extract(epoch FROM least(
           w.oldest + make_interval(secs => q.rate_limit_seconds),
           (SELECT min(frees) FROM held))) AS double precision) AS rate_frees_at,
       false AS key_held,
       EXISTS (SELECT FROM held) AS key_rate_held,
       -- why lease_fair, which runs without lock_limited_queue, may have leased nothing
       q.paused, q.limited AND q.ordering = 'fair' AS fair
  FROM jobq.queues q
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(r.jobs), 0) AS used, min(r.at) AS oldest
          FROM jobq.queue_rate_log r
         WHERE r.queue = q.name
           AND r.at > clock_timestamp() - make_interval(secs => q.rate_limit_seconds)
       ) AS w
 WHERE q.name = :queue;
