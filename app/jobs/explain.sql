-- Explain: what holds one job back now, each fact read by the rules of the claims in
-- lease.sql (app/jobs/service/explain.py turns them into reasons). Every count is
-- bounded or along an index, so it costs the same with a million jobs queued.


-- name: explain_job
-- One job's facts against its queue's state now: when it is due, its unfinished parents
-- (of the `allowed` queues), its queue's pause and limits with what uses them, the jobs
-- a lease takes before it (at most `max_ahead` + 1 counted), when a worker last leased
-- its type or queue, its start deadline, and for a pushed queue its target's host and
-- breaker. No row: no such job.
WITH job AS MATERIALIZED (
    SELECT j.id, j.queue, j.type, j.state, j.priority, j.run_at, j.concurrency_key,
           j.fairness_key, j.attempt, j.max_attempts, j.finished_at, j.last_error,
           j.cancel_requested, j.start_by, j.snoozes
      FROM jobq.jobs j
     WHERE j.id = :job_id
),
q AS MATERIALIZED (
    SELECT p.*
      FROM jobq.queues p
     WHERE p.name = (SELECT queue FROM job)
)
SELECT job.id, job.queue, job.type, CAST(job.state AS text) AS state, job.priority,
       job.run_at, job.run_at > now() AS scheduled, job.attempt, job.max_attempts,
       job.finished_at, job.last_error, job.cancel_requested, now() AS at,
       job.start_by, job.snoozes,
       -- parents not yet resolved, the first few listed
       (SELECT count(*) FROM jobq.job_dependencies d
         WHERE d.child_id = job.id AND NOT d.resolved) AS parents_waiting,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', p.id, 'queue', p.queue, 'type', p.type, 'state', p.state)
                   ORDER BY p.id), '[]')
          FROM (SELECT pj.id, pj.queue, pj.type, pj.state
                  FROM jobq.job_dependencies d
                  JOIN jobq.jobs pj ON pj.id = d.parent_id
                 WHERE d.child_id = job.id AND NOT d.resolved
                   AND (CAST(:allowed_names AS text[]) IS NULL
                        OR pj.queue = ANY(CAST(:allowed_names AS text[]))
                        OR pj.queue LIKE ANY(CAST(:allowed_patterns AS text[])))
                 ORDER BY pj.id
                 LIMIT 20) AS p) AS parents,
       coalesce((SELECT paused FROM q), false) AS paused,
       (SELECT ordering FROM q) AS ordering,
       (SELECT max_running FROM q) AS max_running,
       CASE WHEN (SELECT max_running FROM q) IS NOT NULL THEN
           (SELECT count(*) FROM jobq.jobs r
             WHERE r.state = 'running' AND r.queue = job.queue) END AS running,
       (SELECT max_running_per_key FROM q) AS max_running_per_key,
       job.concurrency_key,
       CASE WHEN (SELECT max_running_per_key FROM q) IS NOT NULL
                 AND job.concurrency_key IS NOT NULL THEN
           (SELECT count(*) FROM jobq.jobs r
             WHERE r.state = 'running' AND r.queue = job.queue
               AND r.concurrency_key = job.concurrency_key) END AS key_running,
       -- the queue's rate window: leases in it, and when its oldest leaves it
       (SELECT rate_limit_jobs FROM q) AS rate_limit_jobs,
       w.used AS rate_used,
       w.oldest + make_interval(secs => (SELECT rate_limit_seconds FROM q)) AS rate_frees_at,
       -- a fair queue's window for this job's fairness key
       job.fairness_key,
       (SELECT rate_limit_per_key_jobs FROM q) AS key_rate_limit_jobs,
       kw.used AS key_rate_used,
       kw.oldest + make_interval(secs => (SELECT rate_limit_per_key_seconds FROM q))
           AS key_rate_frees_at,
       -- due jobs a lease of this queue takes first (claim order), at most max_ahead + 1
       (SELECT count(*) FROM (
            SELECT FROM jobq.jobs a
             WHERE a.state = 'queued' AND a.queue = job.queue AND a.run_at <= now()
               AND (a.priority > job.priority
                    OR (a.priority = job.priority AND (a.run_at, a.id) < (job.run_at, job.id)))
             ORDER BY a.priority DESC, a.run_at, a.id
             LIMIT CAST(:max_ahead AS integer) + 1) AS ahead) AS ahead,
       (SELECT count(*) FROM (
            SELECT FROM jobq.jobs a
             WHERE a.state = 'queued' AND a.queue = job.queue AND a.run_at <= now()
               AND a.priority > job.priority
             ORDER BY a.priority DESC
             LIMIT CAST(:max_ahead AS integer) + 1) AS higher) AS higher_priority,
       (SELECT t.last_leased_at FROM jobq.queue_types t
         WHERE t.queue = job.queue AND t.type = job.type) AS type_leased_at,
       (SELECT max(t.last_leased_at) FROM jobq.queue_types t
         WHERE t.queue = job.queue) AS queue_leased_at,
       -- a pushed queue: its target's host, and until when its breaker holds deliveries
       (SELECT substring(t.url FROM '^[a-z]+://(?:[^/?#@]*@)?([^/?#]*)') FROM jobq.push_targets t
         WHERE t.queue = job.queue) AS push_host,
       (SELECT b.open_until FROM jobq.delivery_breakers b
         WHERE b.target = 'queue:' || job.queue AND b.open_until > now()) AS push_held_until
  FROM job
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(r.jobs), 0) AS used, min(r.at) AS oldest
          FROM jobq.queue_rate_log r
         WHERE r.queue = job.queue AND (SELECT rate_limit_jobs FROM q) IS NOT NULL
           AND r.at > clock_timestamp() - make_interval(secs => (SELECT rate_limit_seconds FROM q))
       ) AS w
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(r.jobs), 0) AS used, min(r.at) AS oldest
          FROM jobq.fair_key_rate_log r
         WHERE r.queue = job.queue AND r.key = job.fairness_key
           AND (SELECT rate_limit_per_key_jobs FROM q) IS NOT NULL
           AND r.at > clock_timestamp()
                      - make_interval(secs => (SELECT rate_limit_per_key_seconds FROM q))
       ) AS kw;
