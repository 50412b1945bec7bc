-- Workers' presence (jobq.workers): what each replica saw, written in one statement a
-- flush; the listing, with what each worker holds now; quiet and resume; retention.


-- name: flush_presence
-- Record the workers one replica saw since its last flush (`seen`: a JSON array, one
-- object each, by worker id), rolling each one's minute window of finished jobs, then
-- read back the ids of every quiet worker.
WITH seen AS (
    SELECT s.*
      FROM jsonb_to_recordset(CAST(:seen AS jsonb))
           AS s(worker_id text, sdk text, version text, host text, queues text[],
                types text[], leased bigint, finished bigint)
     ORDER BY s.worker_id  -- replicas lock the rows they share in one order
),
written AS (
    INSERT INTO jobq.workers AS w
           (worker_id, sdk, version, host, queues, types, leased, finished, window_finished)
    SELECT worker_id, sdk, version, host, queues, types, leased, finished, finished
      FROM seen
        ON CONFLICT (worker_id) DO UPDATE
       SET sdk = coalesce(excluded.sdk, w.sdk),
           version = coalesce(excluded.version, w.version),
           host = coalesce(excluded.host, w.host),
           queues = coalesce(excluded.queues, w.queues),
           types = coalesce(excluded.types, w.types),
           last_seen = now(),
           leased = w.leased + excluded.leased,
           finished = w.finished + excluded.finished,
           finished_per_minute = CASE
               WHEN now() - w.window_at < interval '1 minute' THEN w.finished_per_minute
               ELSE w.window_finished * 60 / extract(epoch FROM now() - w.window_at) END,
           window_finished = CASE
               WHEN now() - w.window_at < interval '1 minute'
               THEN w.window_finished + excluded.finished
               ELSE excluded.finished END,
           window_at = CASE
               WHEN now() - w.window_at < interval '1 minute' THEN w.window_at
               ELSE now() END
    RETURNING 1
)
SELECT worker_id FROM jobq.workers WHERE quiet;


-- name: list_workers
-- A page of workers by id, after `after`: those seen within `retain_seconds` that
-- serve a queue the key may read (names, and LIKE patterns; NULL names: every queue),
-- and those holding running jobs of such queues (how many, of which queues, the first
-- of their ids); `gone` when not seen for `gone_seconds`.
WITH holding AS (
    SELECT worker_id,
           count(*) AS running,
           array_agg(DISTINCT queue ORDER BY queue) AS queues,
           (array_agg(id ORDER BY id))[1:20] AS job_ids,
           max(lease_expires_at - make_interval(secs => current_lease_seconds)) AS last_leased,
           min(lease_expires_at) AS next_expiry
      FROM jobq.jobs
     WHERE state = 'running'
       AND worker_id IS NOT NULL
       AND (CAST(:allowed_names AS text[]) IS NULL
            OR queue = ANY(CAST(:allowed_names AS text[]))
            OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
     GROUP BY worker_id
),
present AS (
    SELECT *
      FROM jobq.workers w
     WHERE w.last_seen >= now() - make_interval(secs => :retain_seconds)
       AND (CAST(:allowed_names AS text[]) IS NULL
            OR w.queues && CAST(:allowed_names AS text[])
            OR EXISTS (SELECT FROM unnest(w.queues) AS q(name)
                        WHERE q.name LIKE ANY(CAST(:allowed_patterns AS text[]))))
)
SELECT worker_id,
       p.sdk,
       p.version,
       p.host,
       coalesce(p.queues, h.queues, '{}') AS queues,
       coalesce(p.types, '{}') AS types,
       coalesce(p.first_seen, h.last_leased) AS first_seen,
       greatest(p.last_seen, h.last_leased) AS last_seen,
       greatest(p.last_seen, h.last_leased)
           < now() - make_interval(secs => :gone_seconds) AS gone,
       coalesce(h.running, 0) AS running,
       coalesce(h.job_ids, '{}') AS job_ids,
       h.next_expiry,
       coalesce(p.leased, 0) AS leased,
       coalesce(p.finished, 0) AS finished,
       CASE WHEN now() - p.window_at < interval '2 minutes' THEN p.finished_per_minute
            ELSE 0 END AS finished_per_minute,
       coalesce(p.quiet, false) AS quiet,
       p.quiet_at,
       p.quieted_by
  FROM present p
  FULL JOIN holding h USING (worker_id)
 WHERE CAST(:after AS text) IS NULL OR worker_id > :after
 ORDER BY worker_id
 LIMIT :limit;


-- name: quiet_worker
-- Ask a worker to lease no more (`quiet`), or to lease again: a worker seen lately, or
-- one holding running jobs that no flush wrote yet (its row made now); its quiet state,
-- none when no such worker is known.
WITH held AS (
    SELECT array_agg(DISTINCT queue ORDER BY queue) AS queues
      FROM jobq.jobs
     WHERE state = 'running' AND worker_id = :worker_id
    HAVING count(*) > 0
),
known AS (
    SELECT CAST(:worker_id AS text) AS worker_id, (SELECT queues FROM held) AS queues
     WHERE EXISTS (SELECT FROM jobq.workers WHERE worker_id = :worker_id)
        OR EXISTS (SELECT FROM held)
)
INSERT INTO jobq.workers AS w (worker_id, queues, quiet, quiet_at, quieted_by)
SELECT worker_id, queues, :quiet, CASE WHEN :quiet THEN now() END,
       CASE WHEN :quiet THEN CAST(:key_name AS text) END
  FROM known
    ON CONFLICT (worker_id) DO UPDATE
   SET quiet = excluded.quiet,
       quiet_at = CASE WHEN excluded.quiet THEN coalesce(w.quiet_at, excluded.quiet_at) END,
       quieted_by = CASE WHEN excluded.quiet
                         THEN CASE WHEN w.quiet THEN w.quieted_by ELSE excluded.quieted_by END
                    END
RETURNING worker_id, quiet, quiet_at, quieted_by;


-- name: prune_workers
-- Delete up to `batch_size` workers not seen for `retain_seconds`, the longest gone
-- first.
WITH old AS (
    SELECT worker_id
      FROM jobq.workers
     WHERE last_seen < now() - make_interval(secs => :retain_seconds)
     ORDER BY last_seen
     LIMIT :batch_size
       FOR UPDATE SKIP LOCKED
)
DELETE FROM jobq.workers w
 USING old
 WHERE w.worker_id = old.worker_id
RETURNING w.worker_id;
