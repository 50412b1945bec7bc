-- Enqueue: the statements that make jobs (one, a batch, a workflow through the SQL
-- functions producers call too) and record the limits those functions apply.
-- A statement that makes jobs `queued` announces them (jobq.announce_due) in its
-- RETURNING, or in a CTE that the final SELECT reads, so that it runs; the NOTIFY is
-- delivered on commit. `:key_id` is the caller's API key (NULL: authentication is off).


-- name: enqueue_one
-- Insert one job unless its queue is full or its idempotency key is held; no row: ask
-- enqueue_held_or_refused why.
-- One node between the parameters and the table: each CTE, join or subquery around an
-- INSERT is set up afresh by every execution, and carrying the whole job row through
-- them cost more than the insert (627k of PostgreSQL's instructions a call, now 378k:
-- bench.pg_calls).
INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                            lease_seconds, idempotency_key, metadata, concurrency_key)
SELECT CAST(:queue AS text), CAST(:type AS text), CAST(:payload AS jsonb),
       CAST(:priority AS smallint),
       coalesce(CAST(:run_at AS timestamptz),
                now() + make_interval(secs => CAST(:delay_seconds AS double precision))),
       -- the queue's own defaults, where its settings have them
       coalesce(CAST(:max_attempts AS integer), q.max_attempts,
                CAST(:default_max_attempts AS integer)),
       coalesce(CAST(:lease_seconds AS integer), q.lease_seconds,
                CAST(:default_lease_seconds AS integer)),
       CAST(:idempotency_key AS text), CAST(:metadata AS jsonb),
       CAST(:concurrency_key AS text)
  FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = :queue
 -- Admission control: only a queue with a max_backlog pays for counting.
 WHERE q.max_backlog IS NULL OR jobq.queue_backlog(:queue, q.max_backlog) < q.max_backlog
ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
    DO NOTHING
-- A job inserted here is queued (one with parents goes through jobq.enqueue).
RETURNING j.*, jobq.announce_due(j.queue, j.run_at, 1) AS announced;


-- name: enqueue_held_or_refused
-- Why enqueue_one inserted nothing: the job holding the key (a replay is answered even
-- when the queue is full), else the queue's backlog if it is full. One row: that job,
-- or NULLs (neither holds any more: try again), and the backlog if it is full.
WITH held AS (
    SELECT j.* FROM jobq.jobs j
     WHERE j.queue = :queue AND j.idempotency_key = :idempotency_key
),
refused AS (
    SELECT * FROM (
        SELECT q.max_backlog, jobq.queue_backlog(:queue, q.max_backlog) AS backlog
          FROM jobq.queues q
         WHERE q.name = :queue AND q.max_backlog IS NOT NULL
           AND NOT EXISTS (SELECT FROM held)
    ) AS admission
     WHERE backlog >= max_backlog
)
SELECT held.*, refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog
  FROM (SELECT) AS one
  LEFT JOIN held ON true
  LEFT JOIN refused ON true;


-- name: enqueue_many
-- Insert a batch into one queue if it fits; rows in request order, duplicates resolved.
WITH input AS MATERIALIZED (
    SELECT nextval('jobq.jobs_id_seq') AS id, i.*
      FROM unnest(CAST(:types AS text[]), CAST(:payloads AS jsonb[]),
                  CAST(:priorities AS smallint[]), CAST(:run_ats AS timestamptz[]),
                  CAST(:delays AS double precision[]), CAST(:max_attempts AS integer[]),
                  CAST(:lease_seconds AS integer[]), CAST(:idempotency_keys AS text[]),
                  CAST(:metadatas AS jsonb[]), CAST(:concurrency_keys AS text[]))
           WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                lease_seconds, idempotency_key, metadata, concurrency_key,
                                ord)
),
policy AS MATERIALIZED (
    -- the queue's own defaults, where its settings have them
    SELECT q.max_attempts, q.lease_seconds
      FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = :queue
),
refused AS MATERIALIZED (
    -- Admission control, all or nothing: the batch's new jobs (keys not yet in the
    -- queue, each counted once) must fit under the queue's max_backlog, if it has one.
    SELECT * FROM (
        SELECT q.max_backlog, jobq.queue_backlog(:queue, q.max_backlog) AS backlog,
               (SELECT count(DISTINCT i.idempotency_key)
                       + count(*) FILTER (WHERE i.idempotency_key IS NULL)
                  FROM input i
                 WHERE NOT EXISTS (SELECT FROM jobq.jobs e
                                    WHERE e.queue = :queue
                                      AND e.idempotency_key = i.idempotency_key)
               ) AS new_jobs
          FROM jobq.queues q
         WHERE q.name = :queue AND q.max_backlog IS NOT NULL
    ) AS admission
     WHERE new_jobs > 0 AND backlog + new_jobs > max_backlog
),
inserted AS (
    INSERT INTO jobq.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                           lease_seconds, idempotency_key, metadata, concurrency_key)
    SELECT i.id, :queue, i.type, i.payload, i.priority,
           coalesce(i.run_at, now() + make_interval(secs => i.delay)),
           coalesce(i.max_attempts, policy.max_attempts,
                    CAST(:default_max_attempts AS integer)),
           coalesce(i.lease_seconds, policy.lease_seconds,
                    CAST(:default_lease_seconds AS integer)),
           i.idempotency_key, i.metadata, i.concurrency_key
      FROM input i CROSS JOIN policy
     WHERE NOT EXISTS (SELECT FROM refused)
     ORDER BY ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING
    RETURNING id, queue, idempotency_key, state, run_at
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM inserted
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT i.ord,
       coalesce(mine.id, sibling.id, earlier.id) AS id,
       coalesce(mine.state, sibling.state, earlier.state) AS state,
       mine.id IS NULL AS deduplicated,
       refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog,
       refused.new_jobs AS refused_new_jobs
  FROM input i
  LEFT JOIN refused ON true
  LEFT JOIN inserted mine ON mine.id = i.id
  LEFT JOIN inserted sibling
         ON mine.id IS NULL AND sibling.idempotency_key = i.idempotency_key
  LEFT JOIN jobq.jobs earlier
         ON mine.id IS NULL AND sibling.id IS NULL
        AND earlier.queue = :queue AND earlier.idempotency_key = i.idempotency_key
 CROSS JOIN (SELECT count(*) FROM announced) AS announcements
 ORDER BY i.ord;


-- name: enqueue_with_dependencies
-- Enqueue one job that depends on others, through the SQL function producers use too;
-- its parents must be in the queues the caller's key may use (NULL names: any queue).
SELECT id, state, deduplicated
  FROM jobq.enqueue(queue => :queue, type => :type, payload => CAST(:payload AS jsonb),
                    priority => :priority, run_at => :run_at,
                    delay_seconds => :delay_seconds, max_attempts => :max_attempts,
                    lease_seconds => :lease_seconds, idempotency_key => :idempotency_key,
                    metadata => CAST(:metadata AS jsonb),
                    depends_on => CAST(:depends_on AS bigint[]),
                    on_parent_failure => :on_parent_failure,
                    concurrency_key => :concurrency_key,
                    parent_queues => CAST(:allowed_names AS text[]),
                    parent_queue_patterns => CAST(:allowed_patterns AS text[]));


-- name: enqueue_workflow
-- Enqueue a batch whose items depend on jobs or on earlier items, through the SQL
-- function; the parents it names must be in the queues the caller's key may use.
SELECT ord, id, state, deduplicated
  FROM jobq.enqueue_many(:queue, CAST(:jobs AS jsonb),
                         parent_queues => CAST(:allowed_names AS text[]),
                         parent_queue_patterns => CAST(:allowed_patterns AS text[]));


-- name: record_enqueue_limits
-- The limits this service runs with, for the SQL enqueue functions to apply the same.
INSERT INTO jobq.enqueue_limits AS l (one, default_max_attempts, default_lease_seconds,
                                      max_lease_seconds, max_payload_bytes, max_json_depth,
                                      max_dependency_depth, max_batch_jobs,
                                      max_batch_dependencies)
VALUES (true, :default_max_attempts, :default_lease_seconds, :max_lease_seconds,
        :max_payload_bytes, :max_json_depth, :max_dependency_depth, :max_batch_jobs,
        :max_batch_dependencies)
ON CONFLICT (one) DO UPDATE
   SET default_max_attempts = excluded.default_max_attempts,
       default_lease_seconds = excluded.default_lease_seconds,
       max_lease_seconds = excluded.max_lease_seconds,
       max_payload_bytes = excluded.max_payload_bytes,
       max_json_depth = excluded.max_json_depth,
       max_dependency_depth = excluded.max_dependency_depth,
       max_batch_jobs = excluded.max_batch_jobs,
       max_batch_dependencies = excluded.max_batch_dependencies,
       updated_at = now()
 WHERE (l.default_max_attempts, l.default_lease_seconds, l.max_lease_seconds,
        l.max_payload_bytes, l.max_json_depth, l.max_dependency_depth, l.max_batch_jobs,
        l.max_batch_dependencies)
       IS DISTINCT FROM (excluded.default_max_attempts, excluded.default_lease_seconds,
                         excluded.max_lease_seconds, excluded.max_payload_bytes,
                         excluded.max_json_depth, excluded.max_dependency_depth,
                         excluded.max_batch_jobs, excluded.max_batch_dependencies);
