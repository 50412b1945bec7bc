-- Single jobs and pages of them: reads, an operator's
-- actions (cancel, retry, delete), dependencies and watches. `:key_id` is the caller's
-- API key (NULL: authentication is off).


-- name: get_job
-- One job by id.
SELECT * FROM jobq.jobs WHERE id = :job_id;


-- name: get_jobs
-- Several jobs by id (to explain why some leases matched nothing).
SELECT * FROM jobq.jobs WHERE id = ANY(CAST(:job_ids AS bigint[]));


-- name: list_jobs
-- A page of jobs after a given id, optionally filtered by queue, state and type, and
-- limited to the queues an API key may read (names, and LIKE patterns; NULL names:
-- every queue).
SELECT *
  FROM jobq.jobs
 WHERE (CAST(:queue AS text) IS NULL OR queue = :queue)
   AND (CAST(:state AS jobq.job_state) IS NULL OR state = CAST(:state AS jobq.job_state))
   AND (CAST(:type AS text) IS NULL OR type = :type)
   AND (CAST(:error_type AS text) IS NULL OR last_error->>'type' = :error_type)
   AND (CAST(:created_after AS timestamptz) IS NULL OR created_at >= :created_after)
   AND (CAST(:created_before AS timestamptz) IS NULL OR created_at < :created_before)
   AND (CAST(:key_contains AS text) IS NULL
        OR strpos(idempotency_key, CAST(:key_contains AS text)) > 0)
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR queue = ANY(CAST(:allowed_names AS text[]))
        OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
   AND id > :after
 ORDER BY id
 LIMIT :limit;


-- name: cancel_job
-- Cancel a waiting or queued job at once; flag a running one for its worker to see on its
-- heartbeat. (Its dependents follow: the jobs_settle_dependents trigger.)
UPDATE jobq.jobs
   SET state = CASE WHEN state IN ('waiting', 'queued') THEN 'cancelled'::jobq.job_state
                    ELSE state END,
       finished_at = CASE WHEN state IN ('waiting', 'queued') THEN now() ELSE finished_at END,
       cancel_requested = true,
       updated_at = now()
 WHERE id = :job_id AND state IN ('waiting', 'queued', 'running')
RETURNING *;


-- name: retry_job
-- Send one failed or cancelled job back to the queue, due at `run_at` (default now), or
-- back to waiting if parents it depends on have yet to succeed; its history is kept.
-- (The dependents its failure cancelled wait again: the jobs_settle_dependents trigger.)
WITH retried AS (
    UPDATE jobq.jobs j
       SET state = CASE WHEN j.waiting_for > 0 THEN 'waiting'
                        ELSE 'queued' END::jobq.job_state,
           run_at = coalesce(CAST(:run_at AS timestamptz), now()),
           attempt = CASE WHEN :reset_attempts THEN 0 ELSE j.attempt END,
           -- a job that used up its attempts gets one more (as River and Oban do)
           max_attempts = CASE WHEN :reset_attempts THEN j.max_attempts
                               ELSE greatest(j.max_attempts, j.attempt + 1) END,
           cancel_requested = false,
           lease_id = NULL,
           lease_expires_at = NULL,
           current_lease_seconds = NULL,
           worker_id = NULL,
           finished_at = NULL,
           updated_at = now()
     -- `state::text`: the partial index of dead jobs cannot serve it, so no cached plan
     -- walks every failed job to find this one
     WHERE j.id = :job_id AND j.state::text IN ('failed', 'cancelled')
       -- never back to waiting for a parent that can no longer settle it
       AND (NOT j.has_parents OR jobq.blocking_parent(j.id) IS NULL)
    RETURNING j.*
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM retried
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT retried.* FROM retried CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: delete_job
-- Delete one job unless it is running.
DELETE FROM jobq.jobs WHERE id = :job_id AND state <> 'running' RETURNING id;


-- ---- dependencies and results ----------------------------------------------------------


-- name: parents_of
-- The parents of the given jobs, with their results (what a child's worker is handed),
-- of the queues the caller's key may use only (names, LIKE patterns; NULL: every queue).
SELECT d.child_id, p.id, p.type, p.state, p.result
  FROM jobq.job_dependencies d
  JOIN jobq.jobs p ON p.id = d.parent_id
 WHERE d.child_id = ANY(CAST(:child_ids AS bigint[]))
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR p.queue = ANY(CAST(:allowed_names AS text[]))
        OR p.queue LIKE ANY(CAST(:allowed_patterns AS text[])))
 ORDER BY d.child_id, p.id;


-- name: dependencies_of
-- A job's parents (`parent`) and children (`child`), each with its queue, type and
-- state: of the queues the caller's key may read only.
SELECT side, id, queue, type, state
  FROM (SELECT 'parent' AS side, p.id, p.queue, p.type, p.state
          FROM jobq.job_dependencies d JOIN jobq.jobs p ON p.id = d.parent_id
         WHERE d.child_id = :job_id
        UNION ALL
        SELECT 'child', c.id, c.queue, c.type, c.state
          FROM jobq.job_dependencies d JOIN jobq.jobs c ON c.id = d.child_id
         WHERE d.parent_id = :job_id) AS linked
 WHERE CAST(:allowed_names AS text[]) IS NULL
    OR queue = ANY(CAST(:allowed_names AS text[]))
    OR queue LIKE ANY(CAST(:allowed_patterns AS text[]))
 ORDER BY 1, 2;


-- name: blocking_parent
-- Why this failed or cancelled job cannot be retried (a parent it waits for ended for
-- good, or is gone); NULL: nothing stands in its way.
SELECT jobq.blocking_parent(:job_id) AS reason;


-- name: watch_job
-- Ask for NOTIFY jobq_finished when this unfinished job finishes (the trigger sends it).
UPDATE jobq.jobs
   SET notify_finish = true
 WHERE id = :job_id AND NOT notify_finish AND state IN ('waiting', 'queued', 'running');
