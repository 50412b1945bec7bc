-- Maintenance: what the elected leader does to the jobs table on its own (the reaper,
-- retention). Each batch runs in a transaction holding the maintenance advisory lock
-- (app/db/leader.py).


-- name: reap_expired
-- Return up to `batch_size` expired leases' jobs to the queue (or `failed`, `cancelled`
-- when it ran out of attempts or its cancellation was requested), an attempt that ran
-- to its timeout recorded as `timeout`; note the pass. Leaves out `skip_ids` (jobs
-- this pass could not move); `only_id`: that job alone.
WITH expired AS (
    SELECT id,
           -- another try, unless its cancellation was requested
           attempt < max_attempts AND NOT cancel_requested AS retry,
           -- a lease ends at its attempt's timeout at the latest (the claim and the
           -- heartbeat cap it there): one that ended there ran out of time
           CASE WHEN lease_expires_at >= attempted_at + make_interval(secs => timeout_seconds)
                THEN jsonb_build_object(
                    'type', 'timeout',
                    'message', format('the attempt ran past the job''s timeout of %s s',
                                      timeout_seconds),
                    'details', jsonb_build_object('worker_id', worker_id,
                                                  'timeout_seconds', timeout_seconds))
                ELSE jsonb_build_object(
                    'type', 'lease_expired',
                    'message', 'the lease expired before the worker finished the job',
                    'details', jsonb_build_object('worker_id', worker_id)) END AS error
      FROM jobq.jobs
     -- through the index of running jobs, the expired sorted here: no index keeps lease
     -- ends, so that a heartbeat extending one is a HOT update (migration 0020)
     WHERE state = 'running' AND lease_expires_at < now()
       AND id <> ALL(CAST(:skip_ids AS bigint[]))
       AND (CAST(:only_id AS bigint) IS NULL OR id = :only_id)
     ORDER BY lease_expires_at
     LIMIT :batch_size
       FOR UPDATE SKIP LOCKED
),
reaped AS (
    UPDATE jobq.jobs j
       SET state = CASE WHEN e.retry THEN 'queued'
                        WHEN j.cancel_requested THEN 'cancelled'
                        ELSE 'failed' END::jobq.job_state,
           run_at = CASE WHEN e.retry
               THEN jobq.queue_retry_at(j.queue, j.attempt, NULL,
                                        :backoff_base, :backoff_cap, :backoff_jitter)
               ELSE j.run_at END,
           finished_at = CASE WHEN e.retry THEN NULL ELSE now() END,
           last_error = e.error,
           lease_expires_at = NULL,
           worker_id = NULL,
           attempts = j.attempts || jobq.attempt_record(
               j.attempt, j.lease_id, j.worker_id, j.lease_key_id, j.attempted_at,
               CASE WHEN e.error->>'type' = 'timeout' THEN 'timeout'
                    ELSE 'lease_expired' END, e.error),
           updated_at = now()
      FROM expired e
     WHERE j.id = e.id
    RETURNING j.id, j.queue, j.state, j.attempt, j.run_at
),
announced AS MATERIALIZED (
    -- jobs queued again; and in a limited queue, any reaped job frees room
    SELECT jobq.announce_due(queue, min(CASE WHEN state = 'queued' THEN run_at
                                             ELSE now() END), count(*))
      FROM reaped
     WHERE state = 'queued'
        OR queue IN (SELECT name FROM jobq.queues WHERE limited)
     GROUP BY queue
),
noted AS (
    -- the leader's last pass, for operators
    INSERT INTO jobq.maintenance_runs (task, finished_at, jobs)
    SELECT 'reaper', clock_timestamp(), count(*) FROM reaped
    ON CONFLICT (task) DO UPDATE SET finished_at = excluded.finished_at, jobs = excluded.jobs
    RETURNING 1
)
SELECT reaped.*
  FROM reaped
 CROSS JOIN (SELECT count(*) FROM announced) AS announcements
 CROSS JOIN (SELECT count(*) FROM noted) AS notes;


-- name: expire_unstarted
-- Cancel up to `batch_size` jobs not leased by their start deadline (`start_by`), with
-- a `last_error` of type `expired`; their dependents follow their on_parent_failure
-- (the state trigger). A job being leased meanwhile is skipped: the claims lease no job
-- past its deadline, and the next pass sees it if it is still waiting or queued.
WITH doomed AS (
    SELECT id
      FROM jobq.jobs
     WHERE start_by < now() AND start_by IS NOT NULL AND state IN ('waiting', 'queued')
     ORDER BY start_by
     LIMIT :batch_size
       FOR UPDATE SKIP LOCKED
)
UPDATE jobq.jobs j
   SET state = 'cancelled',
       finished_at = now(),
       last_error = jsonb_build_object(
           'type', 'expired',
           'message', 'the job was not leased by its start_by deadline',
           'details', jsonb_build_object('start_by', to_char(
               j.start_by AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))),
       updated_at = now()
  FROM doomed
 WHERE j.id = doomed.id AND j.state IN ('waiting', 'queued')
RETURNING j.id, j.queue;


-- name: expired_leases
-- The ids of up to `batch_size` expired leases' jobs, but `skip_ids`: what the reaper
-- moves one at a time when a batch of them failed.
SELECT id
  FROM jobq.jobs
 WHERE state = 'running' AND lease_expires_at < now()
   AND id <> ALL(CAST(:skip_ids AS bigint[]))
 ORDER BY lease_expires_at
 LIMIT :batch_size;


-- fragment: past_retention
-- The finished jobs (`j`) past their retention, oldest first, but `skip_ids` (jobs this
-- pass could not delete); `only_id`: that job alone. The queue's own ages where its
-- settings have them, else the service's (an age of NULL keeps them).
  FROM jobq.jobs j
 CROSS JOIN (SELECT CAST(:succeeded_age AS double precision) AS succeeded,
                    CAST(:failed_age AS double precision) AS failed) AS ages
 -- the shortest age any queue keeps anything: older than this is worth looking at
 CROSS JOIN LATERAL (
        SELECT least(ages.succeeded, ages.failed,
                     (SELECT min(least(q.retain_succeeded_seconds, q.retain_failed_seconds))
                        FROM jobq.queues q)) AS age
       ) AS youngest
  LEFT JOIN jobq.queues q ON q.name = j.queue
 WHERE j.finished_at < now() - make_interval(secs => youngest.age)
   AND ((j.state = 'succeeded'
         AND j.finished_at < now() - make_interval(
             secs => coalesce(q.retain_succeeded_seconds, ages.succeeded)))
     OR (j.state IN ('failed', 'cancelled')
         AND j.finished_at < now() - make_interval(
             secs => coalesce(q.retain_failed_seconds, ages.failed))))
   AND j.id <> ALL(CAST(:skip_ids AS bigint[]))
   AND (CAST(:only_id AS bigint) IS NULL OR j.id = :only_id)
 ORDER BY j.finished_at
 LIMIT :batch_size


-- name: prune_finished
-- Delete up to `batch_size` finished jobs past their retention (see past_retention).
WITH doomed AS (
    SELECT j.id
    {past_retention}
       FOR UPDATE OF j SKIP LOCKED
)
DELETE FROM jobq.jobs j
 USING doomed
 WHERE j.id = doomed.id
RETURNING j.state;


-- name: finished_past_retention
-- The ids of up to `batch_size` finished jobs past their retention (see past_retention):
-- a failed batch's jobs, to delete one at a time.
SELECT j.id
{past_retention};


-- name: tables_to_vacuum
-- jobq's tables that autovacuum leaves alone (off on the server, or for the table) and
-- that hold more dead rows than `min_dead` plus `fraction` of their live ones; most first.
SELECT format('%I.%I', s.schemaname, s.relname) AS name, s.n_dead_tup AS dead
  FROM pg_stat_user_tables s
  JOIN pg_class c ON c.oid = s.relid
 WHERE s.schemaname = 'jobq'
   AND (NOT current_setting('autovacuum')::boolean
        OR EXISTS (SELECT FROM unnest(c.reloptions) AS o(option)
                    WHERE o.option IN ('autovacuum_enabled=false', 'autovacuum_enabled=off')))
   AND s.n_dead_tup > :min_dead + :fraction * s.n_live_tup
 ORDER BY s.n_dead_tup DESC;


-- name: fold_stat_deltas
-- Fold up to `batch_size` statistics deltas (migration 0025) into the counts by state,
-- the per-minute rollups they add to and the last hour's histograms (migration 0035),
-- moving that hour on to now, and up to `batch_size` failed groups' deltas into their
-- counts (migration 0043); how many were folded, the larger of the two slices.
WITH window_moved AS (
    -- the window starts an hour before this minute: the minutes it leaves are taken away
    UPDATE jobq.queue_recent_window
       SET since = date_trunc('minute', now()) - interval '60 minutes'
     WHERE since < date_trunc('minute', now()) - interval '60 minutes'
    RETURNING since AS new_since
),
bounds AS (
    -- scalar subqueries: the planner counts one row, not a guess for a table never
    -- analysed (its guesses crossed made a plan costly enough to JIT-compile);
    -- every part of the statement reads the snapshot from before the UPDATE
    SELECT (SELECT since FROM jobq.queue_recent_window) AS old_since,
           (SELECT new_since FROM window_moved) AS new_since
),
since AS (
    SELECT coalesce(new_since, old_since) AS since FROM bounds
),
slice AS (
    DELETE FROM jobq.job_stat_deltas
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM jobq.job_stat_deltas LIMIT :batch_size))
    RETURNING queue, kind, state, minute, bucket, n
),
counted AS (
    INSERT INTO jobq.job_counts AS c (queue, state, jobs)
    SELECT queue, state, sum(n) FROM slice WHERE kind = 'jobs' GROUP BY queue, state
    ON CONFLICT (queue, state) DO UPDATE SET jobs = c.jobs + excluded.jobs
    RETURNING 1
),
buckets AS (
    SELECT queue, minute, kind, bucket, sum(n) AS n
      FROM slice
     WHERE kind <> 'jobs'
     GROUP BY queue, minute, kind, bucket
),
rolled AS (
    INSERT INTO jobq.queue_minutes AS m (queue, minute, enqueued, succeeded, failed,
                                         wait_buckets, run_buckets)
    SELECT queue, minute,
           coalesce(sum(n) FILTER (WHERE kind = 'enqueued'), 0),
           coalesce(sum(n) FILTER (WHERE kind = 'succeeded'), 0),
           coalesce(sum(n) FILTER (WHERE kind = 'failed'), 0),
           coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'wait'), '{}'),
           coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'run'), '{}')
      FROM buckets
     GROUP BY queue, minute
    ON CONFLICT (queue, minute) DO UPDATE
       SET enqueued = m.enqueued + excluded.enqueued,
           succeeded = m.succeeded + excluded.succeeded,
           failed = m.failed + excluded.failed,
           wait_buckets = jobq.add_buckets(m.wait_buckets, excluded.wait_buckets),
           run_buckets = jobq.add_buckets(m.run_buckets, excluded.run_buckets)
    RETURNING 1
),
recent AS (
    -- one net change an entry: the slice's minutes in the window added, the minutes the
    -- window left (as the rollups held them before this slice) taken away
    INSERT INTO jobq.queue_recent AS r (queue, kind, bucket, jobs)
    SELECT queue, kind, bucket, sum(n)
      FROM (SELECT b.queue, b.kind, coalesce(b.bucket, 0) AS bucket, b.n
              FROM buckets b
             WHERE b.minute >= (SELECT since FROM since)
            UNION ALL
            SELECT m.queue, e.kind, e.bucket, -e.jobs
              FROM jobq.queue_minutes m
             CROSS JOIN LATERAL jobq.minute_entries(m.enqueued, m.succeeded, m.failed,
                                                    m.wait_buckets, m.run_buckets) AS e
             WHERE m.minute >= (SELECT old_since FROM bounds)
               AND m.minute < (SELECT new_since FROM bounds)
           ) AS change
     GROUP BY queue, kind, bucket
    HAVING sum(n) <> 0
    ON CONFLICT (queue, kind, bucket) DO UPDATE SET jobs = r.jobs + excluded.jobs
    RETURNING 1
),
group_slice AS (
    DELETE FROM jobq.failed_group_deltas
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM jobq.failed_group_deltas LIMIT :batch_size))
    RETURNING queue, type, error_type, n
),
grouped AS (
    INSERT INTO jobq.failed_group_counts AS f (queue, type, error_type, jobs)
    SELECT queue, type, error_type, sum(n) FROM group_slice GROUP BY queue, type, error_type
    ON CONFLICT (queue, type, error_type) DO UPDATE SET jobs = f.jobs + excluded.jobs
    RETURNING 1
)
SELECT greatest(count(*), (SELECT count(*) FROM group_slice)) AS folded
  FROM slice
 CROSS JOIN (SELECT count(*) FROM counted) AS counts
 CROSS JOIN (SELECT count(*) FROM rolled) AS minutes
 CROSS JOIN (SELECT count(*) FROM recent) AS histograms
 CROSS JOIN (SELECT count(*) FROM grouped) AS groups;


-- name: forget_empty_failed_groups
-- Delete the failed groups' counts that are down to no job (retried, deleted, pruned);
-- how many.
WITH forgotten AS (
    DELETE FROM jobq.failed_group_counts WHERE jobs = 0 RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;


-- name: prune_queue_minutes
-- Delete up to `batch_size` per-minute rollups older than `retain_seconds`; how many.
WITH pruned AS (
    DELETE FROM jobq.queue_minutes
     WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM jobq.queue_minutes
             WHERE minute < now() - make_interval(secs => :retain_seconds)
             LIMIT :batch_size))
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;


-- name: prune_push_minutes
-- Delete up to `batch_size` per-minute delivery statistics older than `retain_seconds`.
WITH pruned AS (
    DELETE FROM jobq.push_minutes
     WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM jobq.push_minutes
             WHERE minute < now() - make_interval(secs => :retain_seconds)
             LIMIT :batch_size))
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;
