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
     -- `state::text`: no cached plan walks every queued job once per doomed one
     WHERE j.id = doomed.id AND j.state::text = 'queued'
    RETURNING j.id
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT up_to FROM bound) AS up_to;


-- name: get_queue_settings
-- A queue's settings row, if it was ever configured.
SELECT name, max_backlog, max_running, max_running_per_key, rate_limit_jobs,
       rate_limit_seconds, max_attempts, lease_seconds, backoff_base_seconds,
       backoff_cap_seconds, backoff_jitter, retain_succeeded_seconds, retain_failed_seconds,
       ordering, fair_weights, rate_limit_per_key_jobs, rate_limit_per_key_seconds,
       aging_seconds, aging_max, timeout_seconds
  FROM jobq.queues
 WHERE name = :queue;


-- name: set_queue_settings
-- Change the settings named in `given` (to NULL: cleared), creating the queue's row if
-- needed, and tell every replica (NOTIFY jobq_settings): a limit applies to the next
-- lease, a default to the next enqueue.
WITH changed AS (
    INSERT INTO jobq.queues AS q (
        name, max_backlog, max_running, max_running_per_key, rate_limit_jobs,
        rate_limit_seconds, max_attempts, lease_seconds, backoff_base_seconds,
        backoff_cap_seconds, backoff_jitter, retain_succeeded_seconds, retain_failed_seconds,
        ordering, fair_weights, rate_limit_per_key_jobs, rate_limit_per_key_seconds,
        aging_seconds, aging_max, timeout_seconds)
    VALUES (:queue, :max_backlog, :max_running, :max_running_per_key, :rate_limit_jobs,
            :rate_limit_seconds, :max_attempts, :lease_seconds, :backoff_base_seconds,
            :backoff_cap_seconds, :backoff_jitter, :retain_succeeded_seconds,
            :retain_failed_seconds, coalesce(:ordering, 'fifo'), CAST(:fair_weights AS jsonb),
            :rate_limit_per_key_jobs, :rate_limit_per_key_seconds, :aging_seconds, :aging_max,
            :timeout_seconds)
    ON CONFLICT (name) DO UPDATE SET
        max_backlog = CASE WHEN 'max_backlog' = ANY(CAST(:given AS text[]))
                           THEN excluded.max_backlog ELSE q.max_backlog END,
        max_running = CASE WHEN 'max_running' = ANY(CAST(:given AS text[]))
                           THEN excluded.max_running ELSE q.max_running END,
        max_running_per_key = CASE WHEN 'max_running_per_key' = ANY(CAST(:given AS text[]))
                                   THEN excluded.max_running_per_key
                                   ELSE q.max_running_per_key END,
        rate_limit_jobs = CASE WHEN 'rate_limit' = ANY(CAST(:given AS text[]))
                               THEN excluded.rate_limit_jobs ELSE q.rate_limit_jobs END,
        rate_limit_seconds = CASE WHEN 'rate_limit' = ANY(CAST(:given AS text[]))
                                  THEN excluded.rate_limit_seconds
                                  ELSE q.rate_limit_seconds END,
        max_attempts = CASE WHEN 'max_attempts' = ANY(CAST(:given AS text[]))
                            THEN excluded.max_attempts ELSE q.max_attempts END,
        lease_seconds = CASE WHEN 'lease_seconds' = ANY(CAST(:given AS text[]))
                             THEN excluded.lease_seconds ELSE q.lease_seconds END,
        backoff_base_seconds = CASE WHEN 'backoff_base_seconds' = ANY(CAST(:given AS text[]))
                                    THEN excluded.backoff_base_seconds
                                    ELSE q.backoff_base_seconds END,
        backoff_cap_seconds = CASE WHEN 'backoff_cap_seconds' = ANY(CAST(:given AS text[]))
                                   THEN excluded.backoff_cap_seconds
                                   ELSE q.backoff_cap_seconds END,
        backoff_jitter = CASE WHEN 'backoff_jitter' = ANY(CAST(:given AS text[]))
                              THEN excluded.backoff_jitter ELSE q.backoff_jitter END,
        retain_succeeded_seconds = CASE
            WHEN 'retain_succeeded_seconds' = ANY(CAST(:given AS text[]))
            THEN excluded.retain_succeeded_seconds ELSE q.retain_succeeded_seconds END,
        retain_failed_seconds = CASE
            WHEN 'retain_failed_seconds' = ANY(CAST(:given AS text[]))
            THEN excluded.retain_failed_seconds ELSE q.retain_failed_seconds END,
        ordering = CASE WHEN 'ordering' = ANY(CAST(:given AS text[]))
                        THEN excluded.ordering ELSE q.ordering END,
        fair_weights = CASE WHEN 'fair_weights' = ANY(CAST(:given AS text[]))
                            THEN excluded.fair_weights ELSE q.fair_weights END,
        rate_limit_per_key_jobs = CASE WHEN 'rate_limit_per_key' = ANY(CAST(:given AS text[]))
                                       THEN excluded.rate_limit_per_key_jobs
                                       ELSE q.rate_limit_per_key_jobs END,
        rate_limit_per_key_seconds = CASE
            WHEN 'rate_limit_per_key' = ANY(CAST(:given AS text[]))
            THEN excluded.rate_limit_per_key_seconds ELSE q.rate_limit_per_key_seconds END,
        aging_seconds = CASE WHEN 'aging' = ANY(CAST(:given AS text[]))
                             THEN excluded.aging_seconds ELSE q.aging_seconds END,
        aging_max = CASE WHEN 'aging' = ANY(CAST(:given AS text[]))
                         THEN excluded.aging_max ELSE q.aging_max END,
        timeout_seconds = CASE WHEN 'timeout_seconds' = ANY(CAST(:given AS text[]))
                               THEN excluded.timeout_seconds ELSE q.timeout_seconds END,
        updated_at = now()
    RETURNING q.name, q.max_backlog, q.max_running, q.max_running_per_key,
              q.rate_limit_jobs, q.rate_limit_seconds, q.max_attempts, q.lease_seconds,
              q.backoff_base_seconds, q.backoff_cap_seconds, q.backoff_jitter,
              q.retain_succeeded_seconds, q.retain_failed_seconds, q.ordering,
              q.fair_weights, q.rate_limit_per_key_jobs, q.rate_limit_per_key_seconds,
              q.aging_seconds, q.aging_max, q.timeout_seconds
),
told AS MATERIALIZED (
    SELECT pg_notify('jobq_settings', name), jobq.announce_due(name, now(), NULL)
      FROM changed
)
SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM told) AS notices;


-- name: sync_fair_keys
-- After a queue's ordering was set, in the same transaction: its fairness keys' rows
-- made (fair) or dropped (fifo) by jobq.sync_fair_keys.
SELECT keyless, added, dropped FROM jobq.sync_fair_keys(:queue);


-- Statistics: read from the counters and per-minute rollups kept as jobs move (migration
-- 0025), never from a scan of the jobs: counts by state are exact, the last minute's and
-- hour's activity is summed from whole minutes (the oldest one weighted by its part in
-- the window), and wait and run percentiles come from duration buckets (their bound:
-- docs/operations/monitoring.md).

-- name: queue_overview
-- Per queue: jobs queued (and due), running, waiting, failed, cancelled; oldest due
-- job's age; paused. What /metrics shows, without the windows' cost.
SELECT queue, queued, due, running, waiting, failed, cancelled, oldest_due_age_seconds,
       paused, paused_at
  FROM jobq.queue_overview(NULL);


-- name: queue_stats
-- queue_overview's figures for one queue (NULL: every queue), plus the last minute's
-- and hour's activity and the wait and run time percentiles: the hour's sums kept by
-- the statistics' fold (jobq.queue_recent, migration 0035) and its minutes' deltas not
-- folded yet.
WITH bounds AS (
    -- the hour is the minutes from the kept window's start on (an hour before the
    -- minute of the last fold, a second ago), the first weighted by its part in the last
    -- 61 minutes; one row, as the planner sees it too
    SELECT w.since,
           1.0 - greatest(0.0, least(1.0, date_part('epoch', w.since - now()
                                                           + interval '61 minutes') / 60))
               AS first_outside
      FROM (SELECT (SELECT since FROM jobq.queue_recent_window) AS since) AS w
),
entries AS (
    SELECT queue, kind, bucket, CAST(sum(jobs) AS double precision) AS jobs
      FROM (SELECT r.queue, r.kind, r.bucket, r.jobs
              FROM jobq.queue_recent r
             WHERE CAST(:queue AS text) IS NULL OR r.queue = :queue
            UNION ALL
            SELECT d.queue, d.kind, CAST(coalesce(d.bucket, 0) AS smallint), d.n
              FROM jobq.job_stat_deltas d, bounds b
             WHERE d.kind <> 'jobs' AND d.minute >= b.since
               AND (CAST(:queue AS text) IS NULL OR d.queue = :queue)) AS kept
     GROUP BY 1, 2, 3
),
edges AS (
    -- the hour's first minute, outside the hour in part, and the last two minutes, the
    -- last minute's figures (date_part: double precision, where extract's numeric costs
    -- a third of the read)
    SELECT m.queue, c.kind, CAST(c.jobs AS double precision) AS jobs,
           CASE WHEN m.minute = b.since THEN b.first_outside ELSE 0.0 END AS outside_hour,
           greatest(0.0, least(1.0, date_part('epoch', m.minute - now()
                                                       + interval '2 minutes') / 60))
               AS in_minute
      FROM jobq.queue_minute_stats() m
     CROSS JOIN bounds b
     CROSS JOIN LATERAL (VALUES ('enqueued', m.enqueued), ('succeeded', m.succeeded),
                                ('failed', m.failed)) AS c(kind, jobs)
     WHERE (m.minute = (SELECT since FROM jobq.queue_recent_window)
            OR m.minute >= date_trunc('minute', now()) - interval '1 minute')
       AND (CAST(:queue AS text) IS NULL OR m.queue = :queue)
),
activity AS (
    SELECT queue,
           CAST(round(coalesce(sum(in_1m) FILTER (WHERE kind = 'enqueued'), 0)) AS bigint)
               AS enqueued_1m,
           CAST(round(coalesce(sum(in_1h) FILTER (WHERE kind = 'enqueued'), 0)) AS bigint)
               AS enqueued_1h,
           CAST(round(coalesce(sum(in_1m) FILTER (WHERE kind = 'succeeded'), 0)) AS bigint)
               AS succeeded_1m,
           CAST(round(coalesce(sum(in_1h) FILTER (WHERE kind = 'succeeded'), 0)) AS bigint)
               AS succeeded_1h,
           CAST(round(coalesce(sum(in_1m) FILTER (WHERE kind = 'failed'), 0)) AS bigint)
               AS failed_1m,
           CAST(round(coalesce(sum(in_1h) FILTER (WHERE kind = 'failed'), 0)) AS bigint)
               AS failed_1h
      FROM (SELECT queue, kind, jobs AS in_1h, 0.0 AS in_1m
              FROM entries
             WHERE kind IN ('enqueued', 'succeeded', 'failed')
            UNION ALL
            SELECT queue, kind, -jobs * outside_hour, jobs * in_minute
              FROM edges) AS parts
     GROUP BY queue
),
percentiles AS (
    SELECT queue,
           jobq.histogram_percentiles(array_agg(bucket) FILTER (WHERE kind = 'wait'),
                                      array_agg(jobs) FILTER (WHERE kind = 'wait'))
               AS wait_seconds,
           jobq.histogram_percentiles(array_agg(bucket) FILTER (WHERE kind = 'run'),
                                      array_agg(jobs) FILTER (WHERE kind = 'run'))
               AS run_seconds
      FROM entries
     WHERE kind IN ('wait', 'run')
     GROUP BY queue
)
SELECT queue,
       coalesce(o.queued, 0) AS queued,
       coalesce(o.due, 0) AS due,
       coalesce(o.running, 0) AS running,
       coalesce(o.waiting, 0) AS waiting,
       coalesce(o.failed, 0) AS failed,
       coalesce(o.cancelled, 0) AS cancelled,
       o.oldest_due_age_seconds,
       coalesce(o.paused, false) AS paused,
       o.paused_at,
       coalesce(a.enqueued_1m, 0) AS enqueued_1m,
       coalesce(a.enqueued_1h, 0) AS enqueued_1h,
       coalesce(a.succeeded_1m, 0) AS succeeded_1m,
       coalesce(a.succeeded_1h, 0) AS succeeded_1h,
       coalesce(a.failed_1m, 0) AS failed_1m,
       coalesce(a.failed_1h, 0) AS failed_1h,
       p.wait_seconds,
       p.run_seconds
  FROM jobq.queue_overview(:queue) AS o
  FULL JOIN (SELECT * FROM activity
              WHERE enqueued_1h <> 0 OR succeeded_1h <> 0 OR failed_1h <> 0) AS a
       USING (queue)
  LEFT JOIN percentiles AS p USING (queue)
 ORDER BY queue;


-- name: queue_limits
-- The limits in force on limited queues (one, or all): how full each is now, and how
-- many due jobs each limit holds back.
SELECT q.name AS queue, q.max_running, q.max_running_per_key, q.rate_limit_jobs,
       q.rate_limit_seconds, coalesce(w.used, 0) AS rate_used, r.running, d.due, k.held
  FROM jobq.queues q
 CROSS JOIN LATERAL (SELECT count(*) AS running FROM jobq.jobs j
                      WHERE j.state = 'running' AND j.queue = q.name) AS r
 CROSS JOIN LATERAL (SELECT count(*) AS due FROM jobq.jobs j
                      WHERE j.state = 'queued' AND j.queue = q.name
                        AND j.run_at <= now()) AS d
 CROSS JOIN LATERAL (SELECT sum(l.jobs) AS used FROM jobq.queue_rate_log l
                      WHERE l.queue = q.name
                        AND l.at > clock_timestamp()
                                   - make_interval(secs => q.rate_limit_seconds)) AS w
 CROSS JOIN LATERAL (
        -- due jobs whose key already runs max_running_per_key jobs
        SELECT count(*) AS held
          FROM jobq.jobs j
         WHERE q.max_running_per_key IS NOT NULL
           AND j.queue = q.name AND j.state = 'queued' AND j.run_at <= now()
           AND j.concurrency_key IN (
                SELECT f.concurrency_key FROM jobq.jobs f
                 WHERE f.state = 'running' AND f.queue = q.name
                   AND f.concurrency_key IS NOT NULL
                 GROUP BY f.concurrency_key
                HAVING count(*) >= q.max_running_per_key)) AS k
 WHERE q.limited AND (CAST(:queue AS text) IS NULL OR q.name = :queue)
 ORDER BY q.name;


-- name: failed_groups
-- A queue's failed jobs grouped by type and error type, from their counts (migration
-- 0043: folded plus not folded yet): how many, and the latest one's message and time,
-- each by one probe of jobs_failed_latest_idx; the biggest groups first.
WITH groups AS MATERIALIZED (
    SELECT g.type, g.error_type, CAST(sum(g.jobs) AS bigint) AS jobs
      FROM (SELECT c.type, c.error_type, c.jobs FROM jobq.failed_group_counts c
             WHERE c.queue = :queue
            UNION ALL
            SELECT d.type, d.error_type, d.n FROM jobq.failed_group_deltas d
             WHERE d.queue = :queue) AS g
     GROUP BY g.type, g.error_type
    HAVING sum(g.jobs) > 0
     ORDER BY jobs DESC, g.type, g.error_type
     LIMIT :limit
)
SELECT g.type, g.error_type, g.jobs,
       coalesce(typed.message, untyped.message) AS latest_message,
       coalesce(typed.finished_at, untyped.finished_at) AS latest_failed_at
  FROM groups g
  LEFT JOIN LATERAL (
        -- `=` for an error type, IS NULL for none: each branch one index probe
        SELECT j.last_error->>'message' AS message, j.finished_at
          FROM jobq.jobs j
         WHERE j.queue = :queue AND j.state = 'failed' AND j.type = g.type
           AND j.last_error->>'type' = g.error_type
         ORDER BY j.finished_at DESC
         LIMIT 1
       ) AS typed ON true
  LEFT JOIN LATERAL (
        SELECT j.last_error->>'message' AS message, j.finished_at
          FROM jobq.jobs j
         WHERE j.queue = :queue AND j.state = 'failed' AND j.type = g.type
           AND j.last_error->>'type' IS NULL AND g.error_type IS NULL
         ORDER BY j.last_error->>'type' DESC, j.finished_at DESC  -- the index's order
         LIMIT 1
       ) AS untyped ON true
 ORDER BY g.jobs DESC, g.type, g.error_type;


-- name: queue_series
-- A queue's last `minutes` minutes in steps of `step_minutes`: jobs enqueued, succeeded
-- and failed for good in each (from the rollups: jobs deleted since still count).
WITH bounds AS (
    SELECT date_bin(make_interval(mins => :step_minutes), now(),
                    TIMESTAMPTZ '2000-01-01 00:00:00+00') AS last,
           make_interval(mins => :step_minutes) AS step,
           CAST(ceil(CAST(:minutes AS numeric) / :step_minutes) AS integer) AS steps
),
steps AS (
    SELECT generate_series(last - step * (steps - 1), last, step) AS minute FROM bounds
),
rolled AS (
    SELECT date_bin(b.step, m.minute, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS minute,
           sum(m.enqueued) AS enqueued, sum(m.succeeded) AS succeeded,
           sum(m.failed) AS failed
      FROM jobq.queue_minute_stats() m
     CROSS JOIN bounds b
     WHERE m.queue = :queue
       -- a scalar subquery: an index bound, so only the window's minutes are read
       AND m.minute >= (SELECT last - step * (steps - 1) FROM bounds)
     GROUP BY 1
)
SELECT s.minute, CAST(coalesce(r.enqueued, 0) AS bigint) AS enqueued,
       CAST(coalesce(r.succeeded, 0) AS bigint) AS succeeded,
       CAST(coalesce(r.failed, 0) AS bigint) AS failed
  FROM steps s
  LEFT JOIN rolled r USING (minute)
 ORDER BY s.minute;


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
-- Dead tuples and vacuums of the jobs table; the oldest transaction holding back vacuum;
-- when the reaper (on whichever replica led) last finished a pass.
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
        ) held) AS oldest_xmin_age,
       (SELECT finished_at FROM jobq.maintenance_runs WHERE task = 'reaper')
           AS reaper_last_pass
  FROM (SELECT 1) one
  LEFT JOIN pg_stat_user_tables t ON t.relid = 'jobq.jobs'::regclass;


-- name: ever_leased
-- Whether a worker ever leased a job of this queue (one probe of jobq.queue_types' key).
SELECT EXISTS (SELECT FROM jobq.queue_types WHERE queue = :queue) AS ever_leased;


-- name: unserved_types
-- The types of a queue's first `head` due jobs in claim order (read as a lease reads
-- them, along jobs_claim_idx) that have been due over `idle_seconds` and that no worker
-- leased in as long: what sits queued because nobody serves it.
WITH head AS (
    SELECT type, run_at
      FROM jobq.jobs
     WHERE state = 'queued' AND queue = :queue AND run_at <= now()
     ORDER BY priority DESC, run_at, id
     LIMIT :head
)
SELECT h.type,
       CAST(extract(epoch FROM now() - min(h.run_at)) AS double precision)
           AS oldest_due_age_seconds,
       t.last_leased_at
  FROM head AS h
  LEFT JOIN jobq.queue_types AS t ON t.queue = :queue AND t.type = h.type
 WHERE h.run_at <= now() - make_interval(secs => :idle_seconds)
   AND (t.last_leased_at IS NULL
        OR t.last_leased_at < now() - make_interval(secs => :idle_seconds))
 GROUP BY h.type, t.last_leased_at
 ORDER BY h.type;


-- name: busiest_fair_keys
-- A fair queue's fairness keys with the most queued jobs (at most `keys` of them): their
-- queued jobs (counted up to `count_up_to` each), how many are due, and their running
-- jobs. The keys are those with work (jobq.fair_keys), each counted along
-- jobs_fair_claim_idx; the running jobs, from the queue's running ones.
SELECT k.key AS fairness_key, c.queued, c.due, coalesce(r.running, 0) AS running
  FROM jobq.fair_keys k
 CROSS JOIN LATERAL (
        SELECT count(*) AS queued, count(*) FILTER (WHERE w.run_at <= now()) AS due
          FROM (SELECT j.run_at FROM jobq.jobs j
                 WHERE j.queue = k.queue AND j.state = 'queued'
                   AND j.fairness_key >= k.key AND j.fairness_key <= k.key  -- see lease_fair
                 ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id  -- its index
                 LIMIT :count_up_to) AS w
       ) AS c
  LEFT JOIN (SELECT j.fairness_key, count(*) AS running
               FROM jobq.jobs j
              WHERE j.queue = :queue AND j.state = 'running'
              GROUP BY j.fairness_key) AS r ON r.fairness_key = k.key
 WHERE k.queue = :queue
 ORDER BY c.queued DESC, k.key
 LIMIT :keys;
