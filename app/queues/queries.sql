-- Queues: their settings (jobq.queues), the operator actions on a whole queue, and the
-- statistics. A queue exists as soon as a job names it; it has a settings row only once
-- an operator changed one of its settings.


-- name: redrive_failed
-- Send up to `limit` failed jobs of a queue, oldest failure first, back to the queue;
-- their history is kept, and a job that used up its attempts gets one more.
WITH picked AS (
    SELECT id
      FROM jobq.jobs
     WHERE queue = :queue AND state = 'failed'
       AND (CAST(:type AS text) IS NULL OR type = :type)
       AND (CAST(:error_type AS text) IS NULL OR last_error->>'type' = :error_type)
       AND (CAST(:failed_since AS timestamptz) IS NULL OR finished_at >= :failed_since)
     ORDER BY finished_at, id
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
),
retried AS (
    UPDATE jobq.jobs j
       SET state = 'queued',
           run_at = now(),
           attempt = CASE WHEN :reset_attempts THEN 0 ELSE j.attempt END,
           max_attempts = CASE WHEN :reset_attempts THEN j.max_attempts
                               ELSE greatest(j.max_attempts, j.attempt + 1) END,
           cancel_requested = false,
           lease_id = NULL,
           lease_expires_at = NULL,
           current_lease_seconds = NULL,
           worker_id = NULL,
           finished_at = NULL,
           updated_at = now()
      FROM picked
     WHERE j.id = picked.id
    RETURNING j.queue, j.run_at
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*)) FROM retried GROUP BY queue
)
SELECT count(*) AS retried
  FROM retried CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: pause_queue
-- Pause a queue (its row is created if it has none); pausing again keeps `paused_at`.
INSERT INTO jobq.queues AS q (name, paused, paused_at)
VALUES (:queue, true, now())
ON CONFLICT (name) DO UPDATE
   SET paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now()
RETURNING q.name, q.paused, q.paused_at;


-- name: resume_queue
-- Resume a paused queue and wake every lease request waiting on it; a no-op if not paused.
WITH resumed AS (
    UPDATE jobq.queues
       SET paused = false, paused_at = NULL, updated_at = now()
     WHERE name = :queue AND paused
    RETURNING name, paused, paused_at
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(name, now(), NULL) FROM resumed
)
SELECT resumed.* FROM resumed CROSS JOIN (SELECT count(*) FROM announced) AS announcements
UNION ALL
SELECT :queue, false, NULL WHERE NOT EXISTS (SELECT FROM resumed);


-- name: purge_queued
-- Delete up to `batch_size` queued jobs of a queue with ids up to `up_to` (default: all now).
WITH bound AS (
    SELECT coalesce(CAST(:up_to AS bigint), (SELECT max(id) FROM jobq.jobs)) AS up_to
),
doomed AS (
    SELECT id
      FROM jobq.jobs
     WHERE queue = :queue AND state = 'queued' AND id <= (SELECT up_to FROM bound)
     LIMIT :batch_size
       FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM jobq.jobs j
     USING doomed
     WHERE j.id = doomed.id AND j.state = 'queued'
    RETURNING j.id
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT up_to FROM bound) AS up_to;


-- name: get_queue_settings
-- A queue's settings row, if it was ever configured.
SELECT name, max_backlog FROM jobq.queues WHERE name = :queue;


-- name: set_queue_max_backlog
-- Set (or clear, with NULL) a queue's maximum backlog, creating its settings row if needed.
INSERT INTO jobq.queues AS q (name, max_backlog)
VALUES (:queue, :max_backlog)
ON CONFLICT (name) DO UPDATE
    SET max_backlog = excluded.max_backlog, updated_at = now()
RETURNING q.name, q.max_backlog;


-- Statistics: exact figures without reading the whole table. A job enqueued, first
-- leased or finished in the last hour is now queued, running, or finished in the last
-- hour, so those three sets (the claim, lease-expiry and finished indexes) hold every
-- window's rows. Queued, running and waiting jobs come from the view jobq.live_jobs
-- (migration 0010), failed and
-- cancelled ones are counted per queue by jobq.dead_job_counts (migration 0008);
-- succeeded jobs are counted only within the windows, as retention may keep millions.

-- name: queue_overview
-- Per queue: jobs queued (and due), running, waiting, failed, cancelled; oldest due
-- job's age; paused. What /metrics shows, without the windows' cost.
WITH live AS (
    SELECT queue,
           count(*) FILTER (WHERE state = 'queued') AS queued,
           count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) AS due,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'waiting') AS waiting,
           CAST(extract(epoch FROM now() - min(run_at) FILTER (
               WHERE state = 'queued' AND run_at <= now())) AS double precision)
               AS oldest_due_age_seconds
      FROM jobq.live_jobs
     GROUP BY queue
)
SELECT queue,
       coalesce(live.queued, 0) AS queued,
       coalesce(live.due, 0) AS due,
       coalesce(live.running, 0) AS running,
       coalesce(live.waiting, 0) AS waiting,
       coalesce(dead.failed, 0) AS failed,
       coalesce(dead.cancelled, 0) AS cancelled,
       live.oldest_due_age_seconds,
       coalesce(settings.paused, false) AS paused,
       settings.paused_at
  FROM live
  FULL JOIN jobq.dead_job_counts AS dead USING (queue)
  FULL JOIN (SELECT name AS queue, paused, paused_at FROM jobq.queues) AS settings USING (queue)
 ORDER BY queue;


-- name: queue_stats
-- queue_overview's figures for one queue (NULL: every queue), plus the last minute's
-- and hour's activity and the wait and run time percentiles.
WITH recent AS (
    SELECT * FROM jobq.live_jobs
     WHERE CAST(:queue AS text) IS NULL OR queue = :queue
    UNION ALL
    SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
      FROM jobq.jobs
     WHERE finished_at > now() - interval '1 hour'
       AND state NOT IN ('queued', 'running')
       AND (CAST(:queue AS text) IS NULL OR queue = :queue)
),
live AS (
    SELECT queue,
           count(*) FILTER (WHERE state = 'queued') AS queued,
           count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) AS due,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'waiting') AS waiting,
           CAST(extract(epoch FROM now() - min(run_at) FILTER (
               WHERE state = 'queued' AND run_at <= now())) AS double precision)
               AS oldest_due_age_seconds,
           count(*) FILTER (WHERE created_at > now() - interval '1 minute') AS enqueued_1m,
           count(*) FILTER (WHERE created_at > now() - interval '1 hour') AS enqueued_1h,
           count(*) FILTER (
               WHERE state = 'succeeded' AND finished_at > now() - interval '1 minute'
           ) AS succeeded_1m,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded_1h,
           count(*) FILTER (
               WHERE state = 'failed' AND finished_at > now() - interval '1 minute'
           ) AS failed_1m,
           count(*) FILTER (WHERE state = 'failed') AS failed_1h,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
               ORDER BY extract(epoch FROM started_at - created_at)
           ) FILTER (WHERE started_at > now() - interval '1 hour') AS wait_seconds,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
               ORDER BY extract(epoch FROM finished_at - attempted_at)
           ) FILTER (WHERE state IN ('succeeded', 'failed')) AS run_seconds
      FROM recent
     GROUP BY queue
),
dead AS (
    SELECT * FROM jobq.dead_job_counts WHERE CAST(:queue AS text) IS NULL OR queue = :queue
),
settings AS (
    SELECT name AS queue, paused, paused_at
      FROM jobq.queues
     WHERE CAST(:queue AS text) IS NULL OR name = :queue
)
SELECT queue,
       coalesce(live.queued, 0) AS queued,
       coalesce(live.due, 0) AS due,
       coalesce(live.running, 0) AS running,
       coalesce(live.waiting, 0) AS waiting,
       coalesce(dead.failed, 0) AS failed,
       coalesce(dead.cancelled, 0) AS cancelled,
       live.oldest_due_age_seconds,
       coalesce(settings.paused, false) AS paused,
       settings.paused_at,
       coalesce(live.enqueued_1m, 0) AS enqueued_1m,
       coalesce(live.enqueued_1h, 0) AS enqueued_1h,
       coalesce(live.succeeded_1m, 0) AS succeeded_1m,
       coalesce(live.succeeded_1h, 0) AS succeeded_1h,
       coalesce(live.failed_1m, 0) AS failed_1m,
       coalesce(live.failed_1h, 0) AS failed_1h,
       live.wait_seconds,
       live.run_seconds
  FROM live
  FULL JOIN dead USING (queue)
  FULL JOIN settings USING (queue)
 ORDER BY queue;


-- name: running_jobs
-- The longest-running jobs of each queue (at most `per_queue`), with their progress.
SELECT id, queue, type, attempt, max_attempts, worker_id, attempted_at,
       lease_expires_at, cancel_requested, progress_percent, progress_stage,
       progress_message, progress_updated_at
  FROM (SELECT *, row_number() OVER (PARTITION BY queue ORDER BY attempted_at, id) AS n
          FROM jobq.jobs
         WHERE state = 'running'
           AND (CAST(:queue AS text) IS NULL OR queue = :queue)) running
 WHERE n <= :per_queue
 ORDER BY queue, attempted_at, id;


-- name: database_health
-- Dead tuples and vacuums of the jobs table; the oldest transaction holding back vacuum.
SELECT t.n_live_tup AS live_tuples,
       t.n_dead_tup AS dead_tuples,
       t.last_autovacuum,
       t.last_vacuum,
       (SELECT CAST(extract(epoch FROM now() - min(a.xact_start)) AS double precision)
          FROM pg_stat_activity a
         WHERE coalesce(a.datname, current_database()) = current_database()
           AND a.pid <> pg_backend_pid()
           AND a.backend_type <> 'autovacuum worker'
           AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
       ) AS oldest_transaction_age_seconds,
       (SELECT max(age) FROM (
            SELECT age(a.backend_xmin) AS age
              FROM pg_stat_activity a
             WHERE coalesce(a.datname, current_database()) = current_database()
               AND a.pid <> pg_backend_pid()
               AND a.backend_type <> 'autovacuum worker'
            UNION ALL
            SELECT age(a.backend_xid)
              FROM pg_stat_activity a
             WHERE coalesce(a.datname, current_database()) = current_database()
               AND a.pid <> pg_backend_pid()
            UNION ALL
            SELECT age(s.xmin) FROM pg_replication_slots s
            UNION ALL
            SELECT age(p.transaction) FROM pg_prepared_xacts p
             WHERE p.database = current_database()
        ) held) AS oldest_xmin_age
  FROM (SELECT 1) one
  LEFT JOIN pg_stat_user_tables t ON t.relid = 'jobq.jobs'::regclass;
