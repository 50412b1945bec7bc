-- The audit log: one row per admin action or refused attempt at one, written as the
-- request is answered (app/keys/audit.py), read newest first, pruned after retention.


-- name: record_action
-- Note one admin action (or a refused attempt at one) and how it ended.
INSERT INTO jobq.audit_log (key_name, action, method, path, queue, job_id, target, detail,
                            status, request_id)
VALUES (:key_name, :action, :method, :path, :queue, :job_id, :target,
        CAST(:detail AS jsonb), :status, :request_id);


-- name: audit_page
-- Up to `limit` entries older than entry `before`, newest first, narrowed to a key, an
-- action, a queue and a time (NULL: any).
SELECT id, at, key_name, action, method, path, queue, job_id, target, detail, status,
       request_id
  FROM jobq.audit_log
 WHERE id < :before
   AND (CAST(:key_name AS text) IS NULL OR key_name = :key_name)
   AND (CAST(:action AS text) IS NULL OR action = :action)
   AND (CAST(:queue AS text) IS NULL OR queue = :queue)
   AND (CAST(:since AS timestamptz) IS NULL OR at >= :since)
 ORDER BY id DESC
 LIMIT :limit;


-- name: prune_audit
-- Delete the oldest `batch_size` entries written more than `retain_seconds` ago.
WITH oldest AS (
    SELECT id
      FROM jobq.audit_log
     WHERE at < now() - make_interval(secs => :retain_seconds)
     ORDER BY at
     LIMIT :batch_size
),
pruned AS (
    DELETE FROM jobq.audit_log a
     USING oldest o
     WHERE a.id = o.id
    RETURNING a.id
)
SELECT count(*) AS pruned FROM pruned;
