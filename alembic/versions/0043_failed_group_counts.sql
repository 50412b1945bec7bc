-- Migration 0043: a queue's failed jobs counted by type and error type as they move,
-- so that the failed groups (GET /v1/queues/{queue}/failed/groups) cost O(groups), not
-- O(failed jobs). The same statement-level triggers as the other statistics (0025)
-- append each statement's net change to jobq.failed_group_deltas; the maintenance
-- leader folds them into jobq.failed_group_counts; reads add the two. Each group's
-- latest failure is one probe of jobs_failed_latest_idx.

LOCK TABLE jobq.jobs IN SHARE MODE;

CREATE TABLE jobq.failed_group_counts (
    queue text NOT NULL,
    type text NOT NULL,
    error_type text,
    jobs bigint NOT NULL,
    UNIQUE NULLS NOT DISTINCT (queue, type, error_type)
);

COMMENT ON TABLE jobq.failed_group_counts IS
    'Each queue''s failed jobs by type and error type (last_error->>''type''), folded '
    'from jobq.failed_group_deltas; groups at 0 are deleted by the maintenance leader.';

CREATE TABLE jobq.failed_group_deltas (
    queue text NOT NULL,
    type text NOT NULL,
    error_type text,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);

COMMENT ON TABLE jobq.failed_group_deltas IS
    'Changes to jobq.failed_group_counts not yet folded: a statement''s net change to '
    'each group of failed jobs it moved.';

CREATE INDEX IF NOT EXISTS jobs_failed_latest_idx
    ON jobq.jobs (queue, type, (last_error->>'type'), finished_at)
 WHERE state = 'failed';

CREATE OR REPLACE FUNCTION jobq.count_job_changes() RETURNS trigger
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
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT j.queue, j.type, j.last_error->>'type', count(*)
          FROM new_jobs j
         WHERE j.state = 'failed'
         GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'UPDATE' THEN
        -- jobq.job_stats_of's rules, with the old and new rows first grouped by what
        -- they count in (a lease or a complete of many jobs makes a few groups) and the
        -- groups whose rows cancel out (a heartbeat's) dropped before each is spread
        -- into its statistics
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
        SELECT g.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
          FROM (SELECT j.queue, j.state,
                       date_trunc('minute', j.created_at) AS enqueued,
                       date_trunc('minute', j.started_at) AS started,
                       CASE WHEN j.started_at IS NOT NULL THEN jobq.duration_bucket(
                           extract(epoch FROM j.started_at - j.created_at)::double precision)
                       END AS wait,
                       CASE WHEN j.state IN ('succeeded', 'failed')
                            THEN date_trunc('minute', j.finished_at) END AS ended,
                       CASE WHEN j.state IN ('succeeded', 'failed')
                                 AND j.finished_at IS NOT NULL AND j.attempted_at IS NOT NULL
                            THEN jobq.duration_bucket(extract(
                                epoch FROM j.finished_at - j.attempted_at)::double precision)
                       END AS run,
                       sum(j.sign) AS jobs
                  FROM (SELECT n.queue, n.state, n.created_at, n.started_at, n.attempted_at,
                               n.finished_at, 1 AS sign
                          FROM new_jobs n
                        UNION ALL
                        SELECT o.queue, o.state, o.created_at, o.started_at, o.attempted_at,
                               o.finished_at, -1
                          FROM old_jobs o) AS j
                 GROUP BY 1, 2, 3, 4, 5, 6, 7
                HAVING sum(j.sign) <> 0) AS g
         CROSS JOIN LATERAL (VALUES
            ('jobs', g.state, NULL::timestamptz, NULL::smallint, g.jobs),
            ('enqueued', NULL, g.enqueued, NULL, g.jobs),
            ('wait', NULL, g.started, g.wait, CASE WHEN g.started IS NOT NULL THEN g.jobs END),
            (CAST(g.state AS text), NULL, g.ended, NULL,
             CASE WHEN g.ended IS NOT NULL THEN g.jobs END),
            ('run', NULL, g.ended, g.run, CASE WHEN g.run IS NOT NULL THEN g.jobs END)
          ) AS s(kind, state, minute, bucket, n)
         WHERE s.n IS NOT NULL
         GROUP BY 1, 2, 3, 4, 5
        HAVING sum(s.n) <> 0;
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT f.queue, f.type, f.error_type, sum(f.sign)
          FROM (SELECT n.queue, n.type, n.last_error->>'type' AS error_type, 1 AS sign
                  FROM new_jobs n WHERE n.state = 'failed'
                UNION ALL
                SELECT o.queue, o.type, o.last_error->>'type', -1
                  FROM old_jobs o WHERE o.state = 'failed') AS f
         GROUP BY 1, 2, 3
        HAVING sum(f.sign) <> 0;
    ELSE
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, n)
        SELECT j.queue, 'jobs', j.state, -count(*) FROM old_jobs j GROUP BY 1, 3;
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT j.queue, j.type, j.last_error->>'type', -count(*)
          FROM old_jobs j
         WHERE j.state = 'failed'
         GROUP BY 1, 2, 3;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION jobq.forget_job_counts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas WHERE kind = 'jobs';
    DELETE FROM jobq.failed_group_counts;
    DELETE FROM jobq.failed_group_deltas;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION jobq.recount_statistics() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- the statistics of the jobs stored, as deltas (reads count them at once; the
    -- maintenance leader folds them), for a table filled with the triggers off
    LOCK TABLE jobq.jobs IN SHARE MODE;
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas;
    DELETE FROM jobq.queue_minutes;
    DELETE FROM jobq.queue_recent;
    DELETE FROM jobq.failed_group_counts;
    DELETE FROM jobq.failed_group_deltas;
    INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
    SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
      FROM jobq.jobs j
     CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                          j.attempted_at, j.finished_at, 1, true) s
     GROUP BY 1, 2, 3, 4, 5;
    INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
    SELECT j.queue, j.type, j.last_error->>'type', count(*)
      FROM jobq.jobs j
     WHERE j.state = 'failed'
     GROUP BY 1, 2, 3;
END
$$;

-- the failed jobs stored, counted once (the lock taken first: no change falls between
-- this count and the triggers that count every change from here on)
INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
SELECT j.queue, j.type, j.last_error->>'type', count(*)
  FROM jobq.jobs j
 WHERE j.state = 'failed'
 GROUP BY 1, 2, 3;
