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
