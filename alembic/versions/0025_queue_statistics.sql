-- Statistics kept as jobs move: exact counts by queue and state, per-minute rollups
-- (throughput by outcome, wait and run times as duration buckets). Every statement on
-- jobq.jobs appends its net change to jobq.job_stat_deltas (no row that concurrent
-- transactions share: nothing serializes on it); the maintenance leader folds the deltas
-- into jobq.job_counts and jobq.queue_minutes, a slice at a time; reads add the totals
-- to the deltas not folded yet.

CREATE TABLE jobq.job_counts (
    queue text NOT NULL,
    state jobq.job_state NOT NULL,
    jobs bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

CREATE TABLE jobq.queue_minutes (
    queue text NOT NULL,
    minute timestamptz NOT NULL,
    enqueued bigint NOT NULL DEFAULT 0,
    succeeded bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    wait_buckets jsonb NOT NULL DEFAULT '{}',
    run_buckets jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (queue, minute)
);

CREATE INDEX queue_minutes_minute_idx ON jobq.queue_minutes (minute);

CREATE TABLE jobq.job_stat_deltas (
    queue text NOT NULL,
    kind text NOT NULL
        CHECK (kind IN ('jobs', 'enqueued', 'succeeded', 'failed', 'wait', 'run')),
    state jobq.job_state,
    minute timestamptz,
    bucket smallint,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);

COMMENT ON TABLE jobq.job_stat_deltas IS
    'Changes to the statistics not yet folded into jobq.job_counts and jobq.queue_minutes: '
    'kind ''jobs'' moves a count by state; the others add to a minute (''wait'', ''run'': '
    'to a duration bucket).';

CREATE FUNCTION jobq.duration_bucket(seconds double precision) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- 0: under a millisecond; k: [2^((k-1)/2), 2^(k/2)) ms; 60 holds everything longer
    SELECT CAST(CASE WHEN seconds < 0.001 THEN 0
                     ELSE least(60, 1 + floor(2 * ln(seconds * 1000) / ln(2))) END
                AS smallint)
$$;

COMMENT ON FUNCTION jobq.duration_bucket(double precision) IS
    'The histogram bucket of a duration: half powers of two from a millisecond.';

CREATE FUNCTION jobq.bucket_seconds(bucket smallint) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- the bucket's geometric middle: within 2^(1/4) (19 %) of every duration in it
    SELECT CASE WHEN bucket = 0 THEN 0.0005 ELSE 0.001 * power(2, (bucket - 0.5) / 2) END
$$;

COMMENT ON FUNCTION jobq.bucket_seconds(smallint) IS
    'The duration a histogram bucket stands for (its geometric middle).';

CREATE FUNCTION jobq.job_stats_of(
    queue text, state jobq.job_state, created_at timestamptz, started_at timestamptz,
    attempted_at timestamptz, finished_at timestamptz, sign integer, history boolean)
    RETURNS TABLE (queue text, kind text, state jobq.job_state, minute timestamptz,
                   bucket smallint, n bigint)
    LANGUAGE sql STABLE
    AS $$
    -- what one job adds to the statistics (sign -1: takes away); `history` false (a
    -- deletion): its count only, the minutes it made keep it
    SELECT job_stats_of.queue, s.kind, s.state, s.minute, s.bucket, CAST(s.n AS bigint)
      FROM (VALUES
        ('jobs', job_stats_of.state, NULL::timestamptz, NULL::smallint, sign),
        ('enqueued', NULL, date_trunc('minute', created_at), NULL,
         CASE WHEN history THEN sign END),
        ('wait', NULL, date_trunc('minute', started_at),
         jobq.duration_bucket(extract(epoch FROM started_at - created_at)::double precision),
         CASE WHEN history AND started_at IS NOT NULL THEN sign END),
        (CAST(job_stats_of.state AS text), NULL, date_trunc('minute', finished_at), NULL,
         CASE WHEN history AND job_stats_of.state IN ('succeeded', 'failed')
                   AND finished_at IS NOT NULL THEN sign END),
        ('run', NULL, date_trunc('minute', finished_at),
         jobq.duration_bucket(extract(epoch FROM finished_at - attempted_at)::double precision),
         CASE WHEN history AND job_stats_of.state IN ('succeeded', 'failed')
                   AND finished_at IS NOT NULL AND attempted_at IS NOT NULL THEN sign END)
      ) AS s(kind, state, minute, bucket, n)
     WHERE s.n IS NOT NULL
$$;

COMMENT ON FUNCTION jobq.job_stats_of(text, jobq.job_state, timestamptz, timestamptz,
    timestamptz, timestamptz, integer, boolean) IS
    'What one job adds to the statistics: its count by state, its enqueue, first lease '
    '(wait time) and end (outcome, run time), each in its minute.';

CREATE FUNCTION jobq.count_job_changes() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- one row per statistic the statement moved (its net change), none when it moved
    -- nothing counted (a heartbeat, progress)
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
        SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
          FROM new_jobs j
         CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                              j.attempted_at, j.finished_at, 1, true) s
         GROUP BY 1, 2, 3, 4, 5;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
        SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
          FROM (SELECT j.queue, j.state, j.created_at, j.started_at, j.attempted_at,
                       j.finished_at, 1 AS sign
                  FROM new_jobs j
                UNION ALL
                SELECT j.queue, j.state, j.created_at, j.started_at, j.attempted_at,
                       j.finished_at, -1
                  FROM old_jobs j) AS j
         CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                              j.attempted_at, j.finished_at, j.sign, true) s
         GROUP BY 1, 2, 3, 4, 5
        HAVING sum(s.n) <> 0;
    ELSE
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, n)
        SELECT j.queue, 'jobs', j.state, -count(*) FROM old_jobs j GROUP BY 1, 3;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION jobq.count_job_changes() IS
    'After each statement on jobq.jobs: what it changed in the statistics, as deltas.';

CREATE TRIGGER jobs_count_inserts AFTER INSERT ON jobq.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

CREATE TRIGGER jobs_count_updates AFTER UPDATE ON jobq.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

CREATE TRIGGER jobs_count_deletes AFTER DELETE ON jobq.jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

CREATE FUNCTION jobq.forget_job_counts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas WHERE kind = 'jobs';
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION jobq.forget_job_counts() IS
    'After jobq.jobs is truncated: no job is counted (the minutes keep their history).';

CREATE TRIGGER jobs_forget_counts AFTER TRUNCATE ON jobq.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.forget_job_counts();

CREATE FUNCTION jobq.add_buckets(a jsonb, b jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(jsonb_object_agg(key, jobs) FILTER (WHERE jobs <> 0), '{}')
      FROM (SELECT key, sum(CAST(value AS bigint)) AS jobs
              FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b))
                   AS e
             GROUP BY key) AS s
$$;

COMMENT ON FUNCTION jobq.add_buckets(jsonb, jsonb) IS
    'Two histograms ({"bucket": jobs}) added up.';

CREATE FUNCTION jobq.queue_job_counts() RETURNS TABLE (
    queue text, waiting bigint, queued bigint, running bigint, succeeded bigint,
    failed bigint, cancelled bigint)
    LANGUAGE sql STABLE
    AS $$
SELECT c.queue,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'waiting'), 0) AS bigint) AS waiting,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'queued'), 0) AS bigint) AS queued,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'running'), 0) AS bigint) AS running,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'succeeded'), 0) AS bigint) AS succeeded,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'failed'), 0) AS bigint) AS failed,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'cancelled'), 0) AS bigint) AS cancelled
  FROM (SELECT queue, state, jobs FROM jobq.job_counts
        UNION ALL
        SELECT queue, state, n FROM jobq.job_stat_deltas WHERE kind = 'jobs') AS c
 GROUP BY c.queue
$$;

COMMENT ON FUNCTION jobq.queue_job_counts() IS
    'Each queue''s jobs by state, exact: the folded counts plus the deltas not folded yet.';

CREATE FUNCTION jobq.queue_minute_stats() RETURNS TABLE (
    queue text, minute timestamptz, enqueued bigint, succeeded bigint, failed bigint,
    wait_buckets jsonb, run_buckets jsonb)
    LANGUAGE sql STABLE
    AS $$
SELECT m.queue, m.minute, m.enqueued, m.succeeded, m.failed, m.wait_buckets, m.run_buckets
  FROM jobq.queue_minutes m
UNION ALL
SELECT d.queue, d.minute,
       coalesce(sum(n) FILTER (WHERE kind = 'enqueued'), 0),
       coalesce(sum(n) FILTER (WHERE kind = 'succeeded'), 0),
       coalesce(sum(n) FILTER (WHERE kind = 'failed'), 0),
       coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'wait'), '{}'),
       coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'run'), '{}')
  FROM (SELECT queue, minute, kind, bucket, sum(n) AS n
          FROM jobq.job_stat_deltas
         WHERE kind <> 'jobs'
         GROUP BY queue, minute, kind, bucket) AS d
 GROUP BY d.queue, d.minute
$$;

COMMENT ON FUNCTION jobq.queue_minute_stats() IS
    'The per-minute rollups and the deltas not folded yet (a minute may have a row of each: '
    'add them up).';

CREATE FUNCTION jobq.queue_overview(one text) RETURNS TABLE (
    queue text, queued bigint, due bigint, running bigint, waiting bigint, failed bigint,
    cancelled bigint, oldest_due_age_seconds double precision, paused boolean,
    paused_at timestamptz)
    LANGUAGE sql STABLE
    AS $$
    -- counts from the counters; of the queued jobs, those not due yet and the oldest due
    -- one read along the claim index, a probe per priority in use
    WITH counts AS (
        SELECT * FROM jobq.queue_job_counts() c WHERE one IS NULL OR c.queue = one
    ),
    heads AS (
        SELECT c.queue, h.first_due, h.later
          FROM counts c
         CROSS JOIN LATERAL (
            WITH RECURSIVE p(priority) AS (
                SELECT (SELECT max(j.priority) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue)
                UNION ALL
                SELECT (SELECT max(j.priority) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority < p.priority)
                  FROM p
                 WHERE p.priority IS NOT NULL
            )
            SELECT min(f.first_run_at) FILTER (WHERE f.first_run_at <= now()) AS first_due,
                   coalesce(sum(f.later), 0) AS later
              FROM p
             CROSS JOIN LATERAL (
                SELECT (SELECT j.run_at FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority = p.priority
                         ORDER BY j.run_at LIMIT 1) AS first_run_at,
                       (SELECT count(*) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority = p.priority AND j.run_at > now()) AS later
             ) AS f
             WHERE p.priority IS NOT NULL
         ) AS h
         WHERE c.queued > 0
    ),
    settings AS (
        SELECT s.name AS queue, s.paused, s.paused_at
          FROM jobq.queues s
         WHERE one IS NULL OR s.name = one
    )
    SELECT queue,
           coalesce(c.queued, 0),
           coalesce(c.queued - h.later, 0),
           coalesce(c.running, 0),
           coalesce(c.waiting, 0),
           coalesce(c.failed, 0),
           coalesce(c.cancelled, 0),
           CAST(extract(epoch FROM now() - h.first_due) AS double precision),
           coalesce(s.paused, false),
           s.paused_at
      FROM (SELECT * FROM counts
             WHERE queued <> 0 OR running <> 0 OR waiting <> 0 OR failed <> 0
                OR cancelled <> 0) AS c
      LEFT JOIN heads h USING (queue)
      FULL JOIN settings s USING (queue)
     ORDER BY queue
$$;

COMMENT ON FUNCTION jobq.queue_overview(text) IS
    'Per queue (one, or NULL: all): jobs queued, due, running, waiting, failed, '
    'cancelled; the oldest due job''s age; paused.';

CREATE FUNCTION jobq.recount_statistics() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- the statistics of the jobs stored, as deltas (reads count them at once; the
    -- maintenance leader folds them), for a table filled with the triggers off
    LOCK TABLE jobq.jobs IN SHARE MODE;
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas;
    DELETE FROM jobq.queue_minutes;
    INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
    SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
      FROM jobq.jobs j
     CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                          j.attempted_at, j.finished_at, 1, true) s
     GROUP BY 1, 2, 3, 4, 5;
END
$$;

COMMENT ON FUNCTION jobq.recount_statistics() IS
    'Counts and rollups made again from the jobs stored (the history of pruned jobs is lost).';

SELECT jobq.recount_statistics();
