-- The queue core: every statement that enqueues, leases, heartbeats, finishes, reads
-- and acts on single jobs (jobq.jobs).
--
-- State changes are single statements: the claim is `SELECT … FOR UPDATE SKIP LOCKED`
-- inside a CTE feeding an `UPDATE … RETURNING`, and every transition on a lease checks
-- `lease_id` and `state = 'running'` in the `WHERE` of the same `UPDATE`, so a stale
-- worker matches nothing. Batches travel as arrays and are unpacked with `unnest`.
-- A statement that makes jobs `queued` announces them (jobq.announce_due): in its
-- RETURNING, or in a CTE that the final SELECT reads, so that it runs; the NOTIFY is
-- delivered on commit.
-- `:key_id` is the caller's API key (NULL: authentication is off).


-- name: enqueue_one
-- Insert one job unless its queue is full or its idempotency key is held; no row: ask
-- enqueue_held_or_refused why.
-- One node between the parameters and the table: each CTE, join or subquery around an
-- INSERT is set up afresh by every execution, and carrying the whole job row through
-- them cost more than the insert (627k of PostgreSQL's instructions a call, now 378k:
-- bench.pg_calls).
INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                            lease_seconds, idempotency_key, metadata, concurrency_key)
SELECT CAST(:queue AS text), CAST(:type AS text), CAST(:payload AS jsonb),
       CAST(:priority AS smallint),
       coalesce(CAST(:run_at AS timestamptz),
                now() + make_interval(secs => CAST(:delay_seconds AS double precision))),
       -- the queue's own defaults, where its settings have them
       coalesce(CAST(:max_attempts AS integer), q.max_attempts,
                CAST(:default_max_attempts AS integer)),
       coalesce(CAST(:lease_seconds AS integer), q.lease_seconds,
                CAST(:default_lease_seconds AS integer)),
       CAST(:idempotency_key AS text), CAST(:metadata AS jsonb),
       CAST(:concurrency_key AS text)
  FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = :queue
 -- Admission control: only a queue with a max_backlog pays for counting.
 WHERE q.max_backlog IS NULL OR jobq.queue_backlog(:queue, q.max_backlog) < q.max_backlog
ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
    DO NOTHING
-- A job inserted here is queued (one with parents goes through jobq.enqueue).
RETURNING j.*, jobq.announce_due(j.queue, j.run_at, 1) AS announced;


-- name: enqueue_held_or_refused
-- Why enqueue_one inserted nothing: the job holding the key (a replay is answered even
-- when the queue is full), else the queue's backlog if it is full. One row: that job,
-- or NULLs (neither holds any more: try again), and the backlog if it is full.
WITH held AS (
    SELECT j.* FROM jobq.jobs j
     WHERE j.queue = :queue AND j.idempotency_key = :idempotency_key
),
refused AS (
    SELECT * FROM (
        SELECT q.max_backlog, jobq.queue_backlog(:queue, q.max_backlog) AS backlog
          FROM jobq.queues q
         WHERE q.name = :queue AND q.max_backlog IS NOT NULL
           AND NOT EXISTS (SELECT FROM held)
    ) AS admission
     WHERE backlog >= max_backlog
)
SELECT held.*, refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog
  FROM (SELECT) AS one
  LEFT JOIN held ON true
  LEFT JOIN refused ON true;


-- name: enqueue_many
-- Insert a batch into one queue if it fits; rows in request order, duplicates resolved.
WITH input AS MATERIALIZED (
    SELECT nextval('jobq.jobs_id_seq') AS id, i.*
      FROM unnest(CAST(:types AS text[]), CAST(:payloads AS jsonb[]),
                  CAST(:priorities AS smallint[]), CAST(:run_ats AS timestamptz[]),
                  CAST(:delays AS double precision[]), CAST(:max_attempts AS integer[]),
                  CAST(:lease_seconds AS integer[]), CAST(:idempotency_keys AS text[]),
                  CAST(:metadatas AS jsonb[]), CAST(:concurrency_keys AS text[]))
           WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                lease_seconds, idempotency_key, metadata, concurrency_key,
                                ord)
),
policy AS MATERIALIZED (
    -- the queue's own defaults, where its settings have them
    SELECT q.max_attempts, q.lease_seconds
      FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = :queue
),
refused AS MATERIALIZED (
    -- Admission control, all or nothing: the batch's new jobs (keys not yet in the
    -- queue, each counted once) must fit under the queue's max_backlog, if it has one.
    SELECT * FROM (
        SELECT q.max_backlog, jobq.queue_backlog(:queue, q.max_backlog) AS backlog,
               (SELECT count(DISTINCT i.idempotency_key)
                       + count(*) FILTER (WHERE i.idempotency_key IS NULL)
                  FROM input i
                 WHERE NOT EXISTS (SELECT FROM jobq.jobs e
                                    WHERE e.queue = :queue
                                      AND e.idempotency_key = i.idempotency_key)
               ) AS new_jobs
          FROM jobq.queues q
         WHERE q.name = :queue AND q.max_backlog IS NOT NULL
    ) AS admission
     WHERE new_jobs > 0 AND backlog + new_jobs > max_backlog
),
inserted AS (
    INSERT INTO jobq.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                           lease_seconds, idempotency_key, metadata, concurrency_key)
    SELECT i.id, :queue, i.type, i.payload, i.priority,
           coalesce(i.run_at, now() + make_interval(secs => i.delay)),
           coalesce(i.max_attempts, policy.max_attempts,
                    CAST(:default_max_attempts AS integer)),
           coalesce(i.lease_seconds, policy.lease_seconds,
                    CAST(:default_lease_seconds AS integer)),
           i.idempotency_key, i.metadata, i.concurrency_key
      FROM input i CROSS JOIN policy
     WHERE NOT EXISTS (SELECT FROM refused)
     ORDER BY ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING
    RETURNING id, queue, idempotency_key, state, run_at
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM inserted
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT i.ord,
       coalesce(mine.id, sibling.id, earlier.id) AS id,
       coalesce(mine.state, sibling.state, earlier.state) AS state,
       mine.id IS NULL AS deduplicated,
       refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog,
       refused.new_jobs AS refused_new_jobs
  FROM input i
  LEFT JOIN refused ON true
  LEFT JOIN inserted mine ON mine.id = i.id
  LEFT JOIN inserted sibling
         ON mine.id IS NULL AND sibling.idempotency_key = i.idempotency_key
  LEFT JOIN jobq.jobs earlier
         ON mine.id IS NULL AND sibling.id IS NULL
        AND earlier.queue = :queue AND earlier.idempotency_key = i.idempotency_key
 CROSS JOIN (SELECT count(*) FROM announced) AS announcements
 ORDER BY i.ord;


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
   SET state = 'running',
       attempt = j.attempt + 1,
       lease_id = gen_random_uuid(),
       current_lease_seconds = coalesce(:lease_seconds, j.lease_seconds),
       lease_expires_at = now() + make_interval(
           secs => coalesce(:lease_seconds, j.lease_seconds)),
       worker_id = :worker_id,
       lease_key_id = :key_id,
       attempted_at = now(),
       started_at = coalesce(j.started_at, now()),
       updated_at = now()
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
   SET state = 'running',
       attempt = j.attempt + 1,
       lease_id = gen_random_uuid(),
       current_lease_seconds = coalesce(:lease_seconds, j.lease_seconds),
       lease_expires_at = now() + make_interval(
           secs => coalesce(:lease_seconds, j.lease_seconds)),
       worker_id = :worker_id,
       lease_key_id = :key_id,
       attempted_at = now(),
       started_at = coalesce(j.started_at, now()),
       updated_at = now()
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING j.*;


-- ---- limited queues (max_running, max_running_per_key, rate limit) --------------------

-- name: lock_limited_queue
-- Take a limited queue's settings row for this lease's transaction: the leases of one
-- limited queue take turns here, on every replica, so that each one's claim (the next
-- statement, with a snapshot taken after the lock) counts what the one before leased.
-- No row: the queue is not limited (any more).
SELECT paused
  FROM jobq.queues
 WHERE name = :queue AND limited
   FOR UPDATE;


-- name: lease_limited
-- Claim up to `max_jobs` due jobs from one limited queue, its row locked by
-- lock_limited_queue in this transaction, no more than its limits leave: `max_running`
-- less the jobs running now; the rate limit less the jobs leased in its window; and for
-- each concurrency key, `max_running_per_key` less that key's running jobs. Keys are
-- walked one by one along jobs_key_claim_idx, so a key at its limit never hides the
-- next key's jobs. A lease of a rate-limited queue is logged in jobq.queue_rate_log,
-- whose rows older than the window go in the same statement. Times are this statement's
-- (statement_timestamp(), after the lock), not the transaction's, which began waiting
-- for the lock: the leases of one queue take turns, so their times are in order.
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
    -- the queue's concurrency keys with queued jobs, when it limits them
    (SELECT j.concurrency_key AS k
       FROM jobq.jobs j
      WHERE j.queue = :queue AND j.state = 'queued' AND j.concurrency_key IS NOT NULL
        AND (SELECT per_key FROM room) IS NOT NULL
      ORDER BY j.concurrency_key
      LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key
              FROM jobq.jobs j
             WHERE j.queue = :queue AND j.state = 'queued'
               AND j.concurrency_key > keys.k
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
               AND j.run_at <= now()
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
      WHERE j.queue = :queue AND j.state = 'queued' AND j.run_at <= now()
        AND (j.concurrency_key IS NULL OR (SELECT per_key FROM room) IS NULL)
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
       SET state = 'running',
           attempt = j.attempt + 1,
           lease_id = gen_random_uuid(),
           current_lease_seconds = coalesce(:lease_seconds, j.lease_seconds),
           lease_expires_at = statement_timestamp() + make_interval(
               secs => coalesce(:lease_seconds, j.lease_seconds)),
           worker_id = :worker_id,
           lease_key_id = :key_id,
           attempted_at = statement_timestamp(),
           started_at = coalesce(j.started_at, statement_timestamp()),
           updated_at = statement_timestamp()
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
                             AND d.run_at <= now())) AS key_held
  FROM jobq.queues q
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(r.jobs), 0) AS used, min(r.at) AS oldest
          FROM jobq.queue_rate_log r
         WHERE r.queue = q.name
           AND r.at > clock_timestamp() - make_interval(secs => q.rate_limit_seconds)
       ) AS w
 WHERE q.name = :queue;


-- name: limited_queues
-- The queues whose leases go through lease_limited.
SELECT name FROM jobq.queues WHERE limited;


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


-- name: heartbeat
-- Extend a live lease (of this key) and record progress, writing at most once per interval.
WITH held AS (
    SELECT id, lease_expires_at, cancel_requested,
           -- Write the row only when something worth writing changed: the lease's
           -- length; its end, by more than the minimum interval (or a tenth of the
           -- lease, if less); or progress last stored that interval ago or more.
           -- So a runaway worker writes its job's row once per interval.
           coalesce(:extend_seconds, current_lease_seconds) <> current_lease_seconds
           OR now() + make_interval(secs => current_lease_seconds) NOT BETWEEN
              lease_expires_at
              AND lease_expires_at + make_interval(secs => least(
                  CAST(:min_interval AS double precision), current_lease_seconds / 10.0))
           OR (:has_progress AND (progress_updated_at IS NULL OR progress_updated_at
               <= now() - make_interval(secs => CAST(:min_interval AS double precision))))
           AS needs_write
      FROM jobq.jobs
     -- `state::text`: a state test the partial index of running jobs cannot serve, so
     -- that no cached plan walks every running job to find this one (as in finish_one)
     WHERE id = :job_id AND lease_id = :lease_id AND state::text = 'running'
       AND (CAST(:key_id AS bigint) IS NULL OR lease_key_id = CAST(:key_id AS bigint))
),
written AS (
    UPDATE jobq.jobs j
       SET current_lease_seconds = coalesce(:extend_seconds, j.current_lease_seconds),
           lease_expires_at = now() + make_interval(
               secs => coalesce(:extend_seconds, j.current_lease_seconds)),
           progress_percent = CASE WHEN :has_progress THEN :percent ELSE j.progress_percent END,
           progress_stage = CASE WHEN :has_progress THEN :stage ELSE j.progress_stage END,
           progress_message = CASE WHEN :has_progress THEN :message ELSE j.progress_message END,
           progress_updated_at = CASE WHEN :has_progress THEN now()
                                      ELSE j.progress_updated_at END,
           updated_at = now()
      FROM held
     WHERE held.needs_write  -- decided on this statement's snapshot
       AND j.id = held.id AND j.lease_id = :lease_id AND j.state::text = 'running'
    RETURNING j.lease_expires_at, j.cancel_requested
)
SELECT true AS written, lease_expires_at, cancel_requested FROM written
UNION ALL
SELECT false, lease_expires_at, cancel_requested FROM held WHERE NOT held.needs_write;


-- name: finish_one
-- Complete or fail one live lease held by this key, returning the whole job; no row
-- when the lease is stale, unknown or another key's. The same UPDATE as finish_many,
-- its input as scalars in the statement itself: no CTE around it, which every
-- execution would set up afresh with the whole row passing through (455k of
-- PostgreSQL's instructions a call, now 378k: bench.pg_calls), and a plan PostgreSQL
-- keeps (generic) instead of planning each call afresh.
UPDATE jobq.jobs j
   SET state = CASE WHEN :outcome = 'complete' THEN 'succeeded'
                    WHEN :retryable AND j.attempt < j.max_attempts
                         AND NOT j.cancel_requested THEN 'queued'
                    WHEN j.cancel_requested THEN 'cancelled'
                    ELSE 'failed' END::jobq.job_state,
       run_at = CASE WHEN :outcome = 'fail' AND :retryable
                          AND j.attempt < j.max_attempts AND NOT j.cancel_requested
           THEN jobq.queue_retry_at(j.queue, j.attempt, :retry_after,
                                    :backoff_base, :backoff_cap, :backoff_jitter)
           ELSE j.run_at END,
       finished_at = CASE WHEN :outcome = 'fail' AND :retryable
                               AND j.attempt < j.max_attempts AND NOT j.cancel_requested
           THEN NULL ELSE now() END,
       last_error = CASE WHEN :outcome = 'fail' THEN CAST(:error AS jsonb)
                         ELSE j.last_error END,
       result = CASE WHEN :outcome = 'complete' THEN CAST(:result AS jsonb) ELSE j.result END,
       lease_expires_at = NULL,
       worker_id = CASE WHEN :outcome = 'complete' THEN j.worker_id END,
       attempts = CASE WHEN :outcome = 'complete' THEN j.attempts
           ELSE j.attempts || jobq.attempt_record(j.attempt, j.lease_id, j.worker_id,
                                                  j.lease_key_id, j.attempted_at,
                                                  'failed', CAST(:error AS jsonb)) END,
       updated_at = now()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id = CAST(:key_id AS bigint))
-- a job queued again (a retry) is announced
RETURNING j.*,
          CASE WHEN j.state = 'queued' THEN jobq.announce_due(j.queue, j.run_at, 1) END
              AS announced;


-- name: finish_many
-- Complete or fail a batch of live leases held by this key; a stale, unknown or other
-- key's lease matches no row. Each finished job comes back in brief: what the batch's
-- answer and the metrics need, not the payload, result and history.
WITH input AS (
    SELECT *
      FROM unnest(CAST(:job_ids AS bigint[]), CAST(:lease_ids AS uuid[]),
                  CAST(:outcomes AS text[]), CAST(:results AS jsonb[]),
                  CAST(:errors AS jsonb[]), CAST(:retryable AS boolean[]),
                  CAST(:retry_after AS double precision[]))
           WITH ORDINALITY AS i(job_id, lease_id, outcome, result, error, retryable,
                                retry_after, ord)
),
finished AS (
    -- One UPDATE, each ack finding its job by primary key with the lease checked in the
    -- WHERE; when a heartbeat, a cancel or the reaper changed the row meanwhile,
    -- PostgreSQL checks the WHERE again on the newest version, and the SET reads that
    -- version's attempt and cancel flag (no row lock taken beforehand).
    -- - `state::text`: a state test the partial index of running jobs cannot serve, so
    --   that no cached generic plan walks every running job instead of the primary key.
    -- - A fail is tried again while attempts remain, unless its cancellation was asked
    --   for (the same test thrice: a SET cannot read another's new value).
    -- - A succeeded job's last attempt is recorded by its own columns (lease_id,
    --   worker_id, attempted_at, finished_at: jobq.attempts_of), not appended to
    --   `attempts`: a complete writes no history.
    UPDATE jobq.jobs j
       SET state = CASE WHEN i.outcome = 'complete' THEN 'succeeded'
                        WHEN i.retryable AND j.attempt < j.max_attempts
                             AND NOT j.cancel_requested THEN 'queued'
                        WHEN j.cancel_requested THEN 'cancelled'
                        ELSE 'failed' END::jobq.job_state,
           run_at = CASE WHEN i.outcome = 'fail' AND i.retryable
                              AND j.attempt < j.max_attempts AND NOT j.cancel_requested
               THEN jobq.queue_retry_at(j.queue, j.attempt, i.retry_after,
                                        :backoff_base, :backoff_cap, :backoff_jitter)
               ELSE j.run_at END,
           finished_at = CASE WHEN i.outcome = 'fail' AND i.retryable
                                   AND j.attempt < j.max_attempts AND NOT j.cancel_requested
               THEN NULL ELSE now() END,
           last_error = CASE WHEN i.outcome = 'fail' THEN i.error ELSE j.last_error END,
           result = CASE WHEN i.outcome = 'complete' THEN i.result ELSE j.result END,
           lease_expires_at = NULL,
           worker_id = CASE WHEN i.outcome = 'complete' THEN j.worker_id END,
           attempts = CASE WHEN i.outcome = 'complete' THEN j.attempts
               ELSE j.attempts || jobq.attempt_record(j.attempt, j.lease_id, j.worker_id,
                                                      j.lease_key_id, j.attempted_at,
                                                      'failed', i.error) END,
           updated_at = now()
      FROM input i
     WHERE j.id = i.job_id AND j.lease_id = i.lease_id AND j.state::text = 'running'
       AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id = CAST(:key_id AS bigint))
    RETURNING i.ord, j.id, j.queue, j.state, j.attempt, j.attempted_at, j.updated_at,
              j.run_at, j.last_error
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM finished
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT ord, id, queue, state, attempt, attempted_at, updated_at, last_error
  FROM finished CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: complete_one
-- Complete one live lease held by this key, returning the whole job; no row when the
-- lease is stale, unknown or another key's. What finish_one does for a complete, alone:
-- none of a fail's expressions, which each execution sets up whatever its outcome
-- (PostgreSQL's instructions a call, `bench.pg_calls --statements`: 366k with
-- finish_one, 307k). A completed job is not queued again: nothing to announce.
UPDATE jobq.jobs j
   SET state = 'succeeded',
       finished_at = now(),
       result = CAST(:result AS jsonb),
       lease_expires_at = NULL,
       updated_at = now()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id = CAST(:key_id AS bigint))
RETURNING j.*;


-- name: complete_many
-- Complete a batch of live leases held by this key, in brief as finish_many answers; a
-- stale, unknown or other key's lease matches no row. What finish_many does when every
-- ack completes, alone: three arrays instead of seven, no fail's expressions per row
-- (the drain's lease 100 + finish, bench.pg_calls: 211.6k of PostgreSQL's instructions
-- a job with finish_many, 196.9k).
UPDATE jobq.jobs j
   SET state = 'succeeded',
       finished_at = now(),
       result = i.result,
       lease_expires_at = NULL,
       updated_at = now()
  FROM unnest(CAST(:job_ids AS bigint[]), CAST(:lease_ids AS uuid[]),
              CAST(:results AS jsonb[]))
       WITH ORDINALITY AS i(job_id, lease_id, result, ord)
 WHERE j.id = i.job_id AND j.lease_id = i.lease_id AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id = CAST(:key_id AS bigint))
RETURNING i.ord, j.id, j.queue, j.state, j.attempt, j.attempted_at, j.updated_at,
          j.last_error;


-- name: get_job
-- One job by id.
SELECT * FROM jobq.jobs WHERE id = :job_id;


-- name: get_jobs
-- Several jobs by id (to explain why some leases matched nothing).
SELECT * FROM jobq.jobs WHERE id = ANY(CAST(:job_ids AS bigint[]));


-- name: list_jobs
-- A page of jobs after a given id, optionally filtered by queue, state and type, and
-- limited to the queues an API key may read (names, and LIKE patterns; NULL names:
-- every queue).
SELECT *
  FROM jobq.jobs
 WHERE (CAST(:queue AS text) IS NULL OR queue = :queue)
   AND (CAST(:state AS jobq.job_state) IS NULL OR state = CAST(:state AS jobq.job_state))
   AND (CAST(:type AS text) IS NULL OR type = :type)
   AND (CAST(:error_type AS text) IS NULL OR last_error->>'type' = :error_type)
   AND (CAST(:created_after AS timestamptz) IS NULL OR created_at >= :created_after)
   AND (CAST(:created_before AS timestamptz) IS NULL OR created_at < :created_before)
   AND (CAST(:key_contains AS text) IS NULL
        OR strpos(idempotency_key, CAST(:key_contains AS text)) > 0)
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR queue = ANY(CAST(:allowed_names AS text[]))
        OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
   AND id > :after
 ORDER BY id
 LIMIT :limit;


-- name: workers
-- Who is leasing now: each worker holding running jobs (of the queues a key may read),
-- how many, of which queues, the first of their ids, and its last sign of life (its
-- latest lease or heartbeat that extended one).
SELECT worker_id,
       count(*) AS running,
       array_agg(DISTINCT queue ORDER BY queue) AS queues,
       (array_agg(id ORDER BY id))[1:20] AS job_ids,
       max(lease_expires_at - make_interval(secs => current_lease_seconds)) AS last_seen,
       min(lease_expires_at) AS next_expiry
  FROM jobq.jobs
 WHERE state = 'running'
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR queue = ANY(CAST(:allowed_names AS text[]))
        OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
 GROUP BY worker_id
 ORDER BY worker_id
 LIMIT :limit;


-- name: cancel_job
-- Cancel a waiting or queued job at once; flag a running one for its worker to see on its
-- heartbeat. (Its dependents follow: the jobs_settle_dependents trigger.)
UPDATE jobq.jobs
   SET state = CASE WHEN state IN ('waiting', 'queued') THEN 'cancelled'::jobq.job_state
                    ELSE state END,
       finished_at = CASE WHEN state IN ('waiting', 'queued') THEN now() ELSE finished_at END,
       cancel_requested = true,
       updated_at = now()
 WHERE id = :job_id AND state IN ('waiting', 'queued', 'running')
RETURNING *;


-- name: retry_job
-- Send one failed or cancelled job back to the queue, due at `run_at` (default now), or
-- back to waiting if parents it depends on have yet to succeed; its history is kept.
-- (The dependents its failure cancelled wait again: the jobs_settle_dependents trigger.)
WITH retried AS (
    UPDATE jobq.jobs j
       SET state = CASE WHEN j.waiting_for > 0 THEN 'waiting'
                        ELSE 'queued' END::jobq.job_state,
           run_at = coalesce(CAST(:run_at AS timestamptz), now()),
           attempt = CASE WHEN :reset_attempts THEN 0 ELSE j.attempt END,
           -- a job that used up its attempts gets one more (as River and Oban do)
           max_attempts = CASE WHEN :reset_attempts THEN j.max_attempts
                               ELSE greatest(j.max_attempts, j.attempt + 1) END,
           cancel_requested = false,
           lease_id = NULL,
           lease_expires_at = NULL,
           current_lease_seconds = NULL,
           worker_id = NULL,
           finished_at = NULL,
           updated_at = now()
     -- `state::text`: the partial index of dead jobs cannot serve it, so no cached plan
     -- walks every failed job to find this one
     WHERE j.id = :job_id AND j.state::text IN ('failed', 'cancelled')
    RETURNING j.*
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM retried
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT retried.* FROM retried CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: delete_job
-- Delete one job unless it is running.
DELETE FROM jobq.jobs WHERE id = :job_id AND state <> 'running' RETURNING id;


-- ---- dependencies and results ----------------------------------------------------------

-- name: enqueue_with_dependencies
-- Enqueue one job that depends on others, through the SQL function producers use too.
SELECT id, state, deduplicated
  FROM jobq.enqueue(queue => :queue, type => :type, payload => CAST(:payload AS jsonb),
                    priority => :priority, run_at => :run_at,
                    delay_seconds => :delay_seconds, max_attempts => :max_attempts,
                    lease_seconds => :lease_seconds, idempotency_key => :idempotency_key,
                    metadata => CAST(:metadata AS jsonb),
                    depends_on => CAST(:depends_on AS bigint[]),
                    on_parent_failure => :on_parent_failure,
                    concurrency_key => :concurrency_key);


-- name: enqueue_workflow
-- Enqueue a batch whose items depend on jobs or on earlier items, through the SQL function.
SELECT ord, id, state, deduplicated FROM jobq.enqueue_many(:queue, CAST(:jobs AS jsonb));


-- name: parents_of
-- The parents of the given jobs, with their results (what a child's worker is handed).
SELECT d.child_id, p.id, p.type, p.state, p.result
  FROM jobq.job_dependencies d
  JOIN jobq.jobs p ON p.id = d.parent_id
 WHERE d.child_id = ANY(CAST(:child_ids AS bigint[]))
 ORDER BY d.child_id, p.id;


-- name: dependencies_of
-- A job's parents (`parent`) and children (`child`), each with its queue, type and state.
SELECT 'parent' AS side, p.id, p.queue, p.type, p.state
  FROM jobq.job_dependencies d JOIN jobq.jobs p ON p.id = d.parent_id
 WHERE d.child_id = :job_id
UNION ALL
SELECT 'child', c.id, c.queue, c.type, c.state
  FROM jobq.job_dependencies d JOIN jobq.jobs c ON c.id = d.child_id
 WHERE d.parent_id = :job_id
 ORDER BY 1, 2;


-- name: watch_job
-- Ask for NOTIFY jobq_finished when this unfinished job finishes (the trigger sends it).
UPDATE jobq.jobs
   SET notify_finish = true
 WHERE id = :job_id AND NOT notify_finish AND state IN ('waiting', 'queued', 'running');


-- name: record_enqueue_limits
-- The limits this service runs with, for the SQL enqueue functions to apply the same.
INSERT INTO jobq.enqueue_limits AS l (one, default_max_attempts, default_lease_seconds,
                                      max_lease_seconds, max_payload_bytes, max_json_depth)
VALUES (true, :default_max_attempts, :default_lease_seconds, :max_lease_seconds,
        :max_payload_bytes, :max_json_depth)
ON CONFLICT (one) DO UPDATE
   SET default_max_attempts = excluded.default_max_attempts,
       default_lease_seconds = excluded.default_lease_seconds,
       max_lease_seconds = excluded.max_lease_seconds,
       max_payload_bytes = excluded.max_payload_bytes,
       max_json_depth = excluded.max_json_depth,
       updated_at = now()
 WHERE (l.default_max_attempts, l.default_lease_seconds, l.max_lease_seconds,
        l.max_payload_bytes, l.max_json_depth)
       IS DISTINCT FROM (excluded.default_max_attempts, excluded.default_lease_seconds,
                         excluded.max_lease_seconds, excluded.max_payload_bytes,
                         excluded.max_json_depth);
