-- Push targets (`jobq.push_targets`): a pushed queue's endpoint. Every change tells the
-- replicas (NOTIFY jobq_settings, as a queue's settings do) and wakes their dispatchers.


-- name: get_push_target
-- A queue's push target, if it is pushed.
SELECT queue, url, headers, timeout_seconds, secrets, updated_at
  FROM jobq.push_targets
 WHERE queue = :queue;


-- name: push_targets
-- Every pushed queue's target: what each dispatcher delivers to.
SELECT queue, url, headers, timeout_seconds, secrets, updated_at
  FROM jobq.push_targets
 ORDER BY queue;


-- name: set_push_target
-- Make a queue pushed to this target, or change its target (all its fields).
WITH changed AS (
    INSERT INTO jobq.push_targets AS t (queue, url, headers, timeout_seconds, secrets)
    VALUES (:queue, :url, :headers, :timeout_seconds, :secrets)
        ON CONFLICT (queue) DO UPDATE
       SET url = excluded.url,
           headers = excluded.headers,
           timeout_seconds = excluded.timeout_seconds,
           secrets = excluded.secrets,
           updated_at = now()
    RETURNING t.queue, t.url, t.headers, t.timeout_seconds, t.secrets, t.updated_at
),
told AS MATERIALIZED (
    SELECT pg_notify('jobq_settings', queue), jobq.announce_due(queue, now(), NULL)
      FROM changed
)
SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM told) AS notices;


-- name: set_push_target_keeping_secrets
-- Change a pushed queue's target but not its secrets; nothing when it is not pushed.
WITH changed AS (
    UPDATE jobq.push_targets AS t
       SET url = :url, headers = :headers, timeout_seconds = :timeout_seconds,
           updated_at = now()
     WHERE t.queue = :queue
    RETURNING t.queue, t.url, t.headers, t.timeout_seconds, t.secrets, t.updated_at
),
told AS MATERIALIZED (
    SELECT pg_notify('jobq_settings', queue), jobq.announce_due(queue, now(), NULL)
      FROM changed
)
SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM told) AS notices;


-- name: clear_push_target
-- Make a queue pulled again: workers lease its jobs from now on.
WITH deleted AS (
    DELETE FROM jobq.push_targets WHERE queue = :queue RETURNING queue
)
SELECT pg_notify('jobq_settings', queue), jobq.announce_due(queue, now(), NULL)
  FROM deleted;


-- Delivery statistics (`jobq.push_minutes`, migration 0037): each dispatcher counts its
-- deliveries in memory and adds them here every few seconds; reads sum whole minutes
-- (the oldest one weighted by its part in the window, as queue_stats does), and the
-- latency percentiles come from duration buckets.

-- name: add_push_minutes
-- Add one replica's counted deliveries to their minutes: one row per queue and minute.
WITH added AS (
    INSERT INTO jobq.push_minutes AS m (queue, minute, deliveries, classes, latency_buckets)
    SELECT a.queue, a.minute, a.deliveries, CAST(a.classes AS jsonb), CAST(a.latency AS jsonb)
      FROM unnest(CAST(:queues AS text[]), CAST(:minutes AS timestamptz[]),
                  CAST(:deliveries AS bigint[]), CAST(:classes AS text[]),
                  CAST(:latency_buckets AS text[]))
           AS a(queue, minute, deliveries, classes, latency)
     ORDER BY a.queue, a.minute
        ON CONFLICT (queue, minute) DO UPDATE
       SET deliveries = m.deliveries + excluded.deliveries,
           classes = jobq.add_buckets(m.classes, excluded.classes),
           latency_buckets = jobq.add_buckets(m.latency_buckets, excluded.latency_buckets)
    RETURNING 1
)
SELECT count(*) AS added FROM added;


-- name: push_stats
-- Per pushed queue (one, or NULL: every one): deliveries over the last minute and hour,
-- by outcome class, with the latency's p50 and p95 over each window.
WITH minutes AS (
    SELECT m.queue, m.deliveries, m.classes, m.latency_buckets,
           least(1.0, extract(epoch FROM m.minute - now() + interval '61 minutes') / 60)
               AS in_hour,
           greatest(0.0, least(1.0, extract(epoch FROM m.minute - now()
                                                       + interval '2 minutes') / 60))
               AS in_minute
      FROM jobq.push_minutes m
     WHERE m.minute > now() - interval '61 minutes'
       AND (CAST(:queue AS text) IS NULL OR m.queue = :queue)
),
totals AS (
    SELECT queue,
           CAST(round(sum(deliveries * in_minute)) AS bigint) AS deliveries_1m,
           CAST(round(sum(deliveries * in_hour)) AS bigint) AS deliveries_1h
      FROM minutes
     GROUP BY queue
),
classes AS (
    SELECT queue,
           jsonb_object_agg(class, last_minute) FILTER (WHERE last_minute > 0) AS classes_1m,
           jsonb_object_agg(class, last_hour) FILTER (WHERE last_hour > 0) AS classes_1h
      FROM (SELECT m.queue, c.key AS class,
                   CAST(round(sum(CAST(c.value AS bigint) * m.in_minute)) AS bigint)
                       AS last_minute,
                   CAST(round(sum(CAST(c.value AS bigint) * m.in_hour)) AS bigint)
                       AS last_hour
              FROM minutes m
             CROSS JOIN LATERAL jsonb_each_text(m.classes) AS c
             GROUP BY 1, 2) AS by_class
     GROUP BY queue
),
buckets AS (
    SELECT m.queue, w.win, CAST(b.key AS smallint) AS bucket,
           CAST(sum(CAST(b.value AS bigint)) AS double precision) AS n
      FROM minutes m
     CROSS JOIN LATERAL jsonb_each_text(m.latency_buckets) AS b
     CROSS JOIN LATERAL (VALUES ('hour'), ('minute')) AS w(win)
     WHERE w.win = 'hour' OR m.in_minute > 0
     GROUP BY 1, 2, 3
),
percentiles AS (
    SELECT queue,
           jobq.histogram_percentiles(array_agg(bucket) FILTER (WHERE win = 'minute'),
                                      array_agg(n) FILTER (WHERE win = 'minute'))
               AS latency_1m,
           jobq.histogram_percentiles(array_agg(bucket) FILTER (WHERE win = 'hour'),
                                      array_agg(n) FILTER (WHERE win = 'hour'))
               AS latency_1h
      FROM buckets
     GROUP BY queue
)
SELECT t.queue,
       coalesce(s.deliveries_1m, 0) AS deliveries_1m,
       coalesce(s.deliveries_1h, 0) AS deliveries_1h,
       coalesce(c.classes_1m, '{}') AS classes_1m,
       coalesce(c.classes_1h, '{}') AS classes_1h,
       p.latency_1m,
       p.latency_1h
  FROM jobq.push_targets t
  LEFT JOIN totals s USING (queue)
  LEFT JOIN classes c USING (queue)
  LEFT JOIN percentiles p USING (queue)
 WHERE CAST(:queue AS text) IS NULL OR t.queue = :queue
 ORDER BY t.queue;
