-- The last hour's activity and wait and run histograms of each queue, kept as they
-- change, so that `GET /v1/queues` reads a few rows a queue instead of an hour of
-- per-minute rollups (50 queues: 3,050 minute rows, 90,000 bucket entries, 140 ms).
--
-- jobq.queue_recent holds, per queue, kind and bucket, the jobs of the minutes from
-- jobq.queue_recent_window.since on. The statistics' fold (the maintenance leader, one
-- statement) keeps it: the deltas it folds into minutes of the window are added, and
-- when the window moves on, the minutes it leaves are taken away, read from
-- jobq.queue_minutes in the same statement. Reads add the deltas not folded yet and take
-- away the minutes the window still holds when the fold lags.

CREATE TABLE jobq.queue_recent (
    queue text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('enqueued', 'succeeded', 'failed', 'wait', 'run')),
    bucket smallint NOT NULL,
    jobs bigint NOT NULL,
    PRIMARY KEY (queue, kind, bucket)
);

COMMENT ON TABLE jobq.queue_recent IS
    'Each queue''s jobs enqueued, succeeded and failed (bucket 0) and wait and run '
    'histograms summed over the minutes from jobq.queue_recent_window.since on (kept by '
    'the statistics'' fold).';

CREATE TABLE jobq.queue_recent_window (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    since timestamptz NOT NULL
);

COMMENT ON TABLE jobq.queue_recent_window IS
    'The first minute jobq.queue_recent covers: the minute an hour before the last fold''s.';

CREATE FUNCTION jobq.minute_entries(
    enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb)
    RETURNS TABLE (kind text, bucket smallint, jobs bigint)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- a per-minute rollup as jobq.queue_recent's entries: its counts as bucket 0, then
    -- each histogram bucket
    SELECT c.kind, CAST(0 AS smallint), c.jobs
      FROM (VALUES ('enqueued', enqueued), ('succeeded', succeeded), ('failed', failed))
           AS c(kind, jobs)
     WHERE c.jobs <> 0
    UNION ALL
    SELECT 'wait', CAST(key AS smallint), CAST(value AS bigint)
      FROM jsonb_each_text(wait_buckets)
    UNION ALL
    SELECT 'run', CAST(key AS smallint), CAST(value AS bigint)
      FROM jsonb_each_text(run_buckets)
$$;

COMMENT ON FUNCTION jobq.minute_entries(bigint, bigint, bigint, jsonb, jsonb) IS
    'A per-minute rollup as jobq.queue_recent''s entries (counts in bucket 0).';

-- jobq's functions are the service's (a producer role executes enqueue's two only)
REVOKE EXECUTE ON FUNCTION jobq.minute_entries(bigint, bigint, bigint, jsonb, jsonb)
    FROM PUBLIC;

INSERT INTO jobq.queue_recent_window (since)
VALUES (date_trunc('minute', now()) - interval '60 minutes');

INSERT INTO jobq.queue_recent (queue, kind, bucket, jobs)
SELECT m.queue, e.kind, e.bucket, sum(e.jobs)
  FROM jobq.queue_minutes m
 CROSS JOIN LATERAL jobq.minute_entries(m.enqueued, m.succeeded, m.failed,
                                        m.wait_buckets, m.run_buckets) AS e
 WHERE m.minute >= (SELECT since FROM jobq.queue_recent_window)
 GROUP BY 1, 2, 3;

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
    INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
    SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
      FROM jobq.jobs j
     CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                          j.attempted_at, j.finished_at, 1, true) s
     GROUP BY 1, 2, 3, 4, 5;
END
$$;
