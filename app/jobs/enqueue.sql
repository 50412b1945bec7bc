-- Enqueue: the statements that make jobs (one, a batch, a workflow) through the SQL
-- functions producers call too, and record the limits those functions apply. Every job
-- is made by jobq.insert_jobs (migration 0023): defaults, admission, idempotency and
-- the wake-up (delivered on commit) are its rules; the service checks the fields first.


-- name: enqueue_one
-- Make one job through jobq.insert_jobs, the enqueue's rules (jobq.enqueue runs them
-- too): the job, new or holding the key; or the queue's refusal; or neither (the job
-- holding the key went between the insert and the look: try again).
SELECT (f.job).*, f.deduplicated, f.refused_max_backlog, f.refused_backlog, f.replaced
  FROM jobq.insert_jobs(
           CAST(:queue AS text), ARRAY[CAST(:type AS text)], ARRAY[CAST(:payload AS jsonb)],
           ARRAY[CAST(:priority AS integer)], ARRAY[CAST(:run_at AS timestamptz)],
           ARRAY[CAST(:delay_seconds AS double precision)],
           ARRAY[CAST(:max_attempts AS integer)], ARRAY[CAST(:lease_seconds AS integer)],
           ARRAY[CAST(:idempotency_key AS text)], ARRAY[CAST(:metadata AS jsonb)],
           ARRAY[CAST(:concurrency_key AS text)], CAST(:default_max_attempts AS integer),
           CAST(:default_lease_seconds AS integer),
           runs_on_parent_failure => ARRAY[CAST(:runs_on_parent_failure AS boolean)],
           fairness_keys => ARRAY[CAST(:fairness_key AS text)],
           uniques => ARRAY[CAST(:unique AS jsonb)],
           timeouts => ARRAY[CAST(:timeout_seconds AS integer)],
           start_bys => ARRAY[CAST(:start_by AS timestamptz)],
           traceparents => ARRAY[CAST(:traceparent AS text)],
           tracestates => ARRAY[CAST(:tracestate AS text)]
       ) AS f;


-- name: enqueue_many
-- Make a batch of jobs in one queue through jobq.insert_jobs, if it fits: one row a
-- job, in order (no id: its key changed hands meanwhile), or the refusal on every row.
SELECT f.ord, f.id, f.state, f.deduplicated,
       f.refused_max_backlog, f.refused_backlog, f.refused_new_jobs, f.replaced
  FROM jobq.insert_jobs(
           CAST(:queue AS text), CAST(:types AS text[]), CAST(:payloads AS jsonb[]),
           CAST(:priorities AS integer[]), CAST(:run_ats AS timestamptz[]),
           CAST(:delays AS double precision[]), CAST(:max_attempts AS integer[]),
           CAST(:lease_seconds AS integer[]), CAST(:idempotency_keys AS text[]),
           CAST(:metadatas AS jsonb[]), CAST(:concurrency_keys AS text[]),
           CAST(:default_max_attempts AS integer), CAST(:default_lease_seconds AS integer),
           runs_on_parent_failure => CAST(:runs_on_parent_failure AS boolean[]),
           fairness_keys => CAST(:fairness_keys AS text[]),
           uniques => CAST(:uniques AS jsonb[]),
           timeouts => CAST(:timeouts AS integer[]), start_bys => CAST(:start_bys AS timestamptz[]),
           traceparents => CAST(:traceparents AS text[]),
           tracestates => CAST(:tracestates AS text[])
       ) AS f
 ORDER BY f.ord;


-- name: enqueue_with_dependencies
-- Enqueue one job that depends on others, through the SQL function producers use too;
-- its parents must be in the queues the caller's key may use (NULL names: any queue).
SELECT id, state, deduplicated, replaced
  FROM jobq.enqueue(queue => :queue, type => :type, payload => CAST(:payload AS jsonb),
                    priority => :priority, run_at => :run_at,
                    delay_seconds => :delay_seconds, max_attempts => :max_attempts,
                    lease_seconds => :lease_seconds, idempotency_key => :idempotency_key,
                    metadata => CAST(:metadata AS jsonb),
                    depends_on => CAST(:depends_on AS bigint[]),
                    on_parent_failure => :on_parent_failure,
                    concurrency_key => :concurrency_key,
                    timeout_seconds => CAST(:timeout_seconds AS integer),
                    start_by => CAST(:start_by AS timestamptz),
                    parent_queues => CAST(:allowed_names AS text[]),
                    parent_queue_patterns => CAST(:allowed_patterns AS text[]),
                    fairness_key => :fairness_key,
                    unique_key => CAST(:unique AS jsonb)->>'key',
                    unique_period => CAST(CAST(:unique AS jsonb)->>'period' AS integer),
                    unique_states => CASE WHEN CAST(:unique AS jsonb) ? 'states'
                                          THEN ARRAY(SELECT jsonb_array_elements_text(
                                                   CAST(:unique AS jsonb)->'states')) END,
                    unique_on_conflict => CAST(:unique AS jsonb)->>'on_conflict',
                    traceparent => CAST(:traceparent AS text),
                    tracestate => CAST(:tracestate AS text));


-- name: enqueue_workflow
-- Enqueue a batch whose items depend on jobs or on earlier items, through the SQL
-- function; the parents it names must be in the queues the caller's key may use.
SELECT ord, id, state, deduplicated, replaced
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
