-- Migration 0040: an update's statistics, grouped before they are spread. The deltas
-- written are the same as 0025's (each statistic's net change per queue, kind, state,
-- minute and bucket), so deltas written before and after the upgrade add up alike.

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
    ELSE
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, n)
        SELECT j.queue, 'jobs', j.state, -count(*) FROM old_jobs j GROUP BY 1, 3;
    END IF;
    RETURN NULL;
END
$$;
