-- Migration 0037: a job's W3C trace context. (See 0037_trace_context.py for what each
-- part is for.)

ALTER TABLE jobq.jobs
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate text;

-- Refuse a trace context as the API's schema refuses it (W3C Trace Context): SQLSTATE
-- JQ422, the field (after `at`, e.g. a batch item's `jobs.3.trace.`) the DETAIL. A
-- traceparent is version-trace_id-parent_id-flags in lowercase hex, version ff and
-- all-zero ids invalid, version 00 exactly 55 characters; a tracestate is 1 to 32
-- comma-separated key=value members, and needs a traceparent.
CREATE FUNCTION jobq.check_trace(traceparent text, tracestate text, at text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    members bigint;
    malformed bigint;
BEGIN
    IF traceparent IS NULL THEN
        IF tracestate IS NOT NULL THEN
            RAISE EXCEPTION 'a tracestate needs a traceparent'
                USING ERRCODE = 'JQ422', DETAIL = at || 'tracestate';
        END IF;
        RETURN;
    END IF;
    IF length(traceparent) > 512
       OR traceparent !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$'
       OR left(traceparent, 2) = 'ff'
       OR (left(traceparent, 2) = '00' AND length(traceparent) <> 55)
       OR substr(traceparent, 4, 32) = repeat('0', 32)
       OR substr(traceparent, 37, 16) = repeat('0', 16) THEN
        RAISE EXCEPTION 'traceparent must be a W3C traceparent: version-trace_id-parent_id-flags in lowercase hex (2, 32, 16 and 2 digits), ids not all zeros'
            USING ERRCODE = 'JQ422', DETAIL = at || 'traceparent';
    END IF;
    IF tracestate IS NULL THEN
        RETURN;
    END IF;
    SELECT count(*),
           count(*) FILTER (WHERE m !~ ('^([a-z][_0-9a-z*/-]{0,255}'
                                         '|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})'
                                         '=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}'
                                         '[\x21-\x2b\x2d-\x3c\x3e-\x7e]$'))
      INTO members, malformed
      FROM regexp_split_to_table(tracestate, ',') AS s(member),
           LATERAL btrim(s.member, E' \t') AS m
     WHERE m <> '';
    IF length(tracestate) > 8192 OR members NOT BETWEEN 1 AND 32 OR malformed > 0 THEN
        RAISE EXCEPTION 'tracestate must be a W3C tracestate (1 to 32 comma-separated key=value members)'
            USING ERRCODE = 'JQ422', DETAIL = at || 'tracestate';
    END IF;
END
$$;

-- A batch item's `trace` (jobq.enqueue_many), as the API takes it: null, or an object
-- of a `traceparent` and an optional `tracestate`, both strings.
CREATE FUNCTION jobq.check_trace_of(trace jsonb, at text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF trace IS NULL OR jsonb_typeof(trace) = 'null' THEN
        RETURN;
    END IF;
    IF jsonb_typeof(trace) <> 'object'
       OR EXISTS (SELECT FROM jsonb_object_keys(trace) AS k
                   WHERE k NOT IN ('traceparent', 'tracestate'))
       OR jsonb_typeof(trace->'traceparent') IS DISTINCT FROM 'string'
       OR coalesce(jsonb_typeof(trace->'tracestate'), 'string') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'trace must be an object of a traceparent and an optional tracestate'
            USING ERRCODE = 'JQ422', DETAIL = at;
    END IF;
    PERFORM jobq.check_trace(trace->>'traceparent', trace->>'tracestate', at || '.');
END
$$;

-- The one enqueue stores each job's trace context (0030's, with `traceparents` and
-- `tracestates`).
DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[],
    double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer,
    integer[], boolean[], jsonb[], text[], jsonb[], integer[], timestamptz[]);

-- Since 0037: each job's `traceparents` and `tracestates` (NULL: none), stored as given
-- (the callers check them).
CREATE FUNCTION jobq.insert_jobs(
    queue text,
    types text[],
    payloads jsonb[],
    priorities integer[],
    run_ats timestamptz[],
    delays double precision[],
    max_attempts integer[],
    lease_seconds integer[],
    idempotency_keys text[],
    metadatas jsonb[],
    concurrency_keys text[],
    default_max_attempts integer,
    default_lease_seconds integer,
    waiting_fors integer[] DEFAULT NULL,
    runs_on_parent_failure boolean[] DEFAULT NULL,
    parent_failures jsonb[] DEFAULT NULL,
    fairness_keys text[] DEFAULT NULL,
    uniques jsonb[] DEFAULT NULL,
    timeouts integer[] DEFAULT NULL,
    start_bys timestamptz[] DEFAULT NULL,
    traceparents text[] DEFAULT NULL,
    tracestates text[] DEFAULT NULL
)
RETURNS TABLE (ord integer, id bigint, state jobq.job_state, deduplicated boolean,
               job jobq.jobs, refused_max_backlog integer, refused_backlog bigint,
               refused_new_jobs bigint, replaced boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    made jobq.jobs;
    holder jobq.jobs;
    refusal record;
    options jsonb;
    since timestamptz;
BEGIN
    IF coalesce(num_nonnulls(VARIADIC uniques), 0) > 0 THEN
        -- Jobs with unique options: admitted together (jobq.new_job_keys), then made one
        -- at a time, each answered by the job holding its key or its uniqueness if any.
        SELECT * INTO refusal
          FROM jobq.backlog_refusal(insert_jobs.queue,
                                    jobq.new_job_keys(insert_jobs.queue, types,
                                                      idempotency_keys, uniques));
        IF FOUND THEN
            RETURN QUERY
                SELECT n::integer, NULL::bigint, NULL::jobq.job_state, false, NULL::jobq.jobs,
                       refusal.max_backlog, refusal.backlog, refusal.new_jobs, false
                  FROM generate_series(1, cardinality(types)) AS n;
            RETURN;
        END IF;
        FOR n IN 1..cardinality(types) LOOP
            options := uniques[n];
            since := jobq.unique_since(options);
            ord := n;
            id := NULL;
            state := NULL;
            job := NULL;
            replaced := false;
            -- a few times: the job holding it may finish between the insert and the look
            FOR round IN 1..3 LOOP
                INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at,
                                            max_attempts, lease_seconds, idempotency_key,
                                            metadata, concurrency_key, state, waiting_for,
                                            has_parents, run_on_parent_failure, finished_at,
                                            last_error, fairness_key, unique_key,
                                            unique_period, unique_since, unique_states,
                                            timeout_seconds, start_by, traceparent,
                                            tracestate)
                SELECT insert_jobs.queue, types[n], coalesce(payloads[n], 'null'::jsonb),
                       priorities[n],
                       coalesce(run_ats[n], now() + make_interval(secs => coalesce(delays[n], 0))),
                       coalesce(insert_jobs.max_attempts[n], q.max_attempts, default_max_attempts),
                       coalesce(insert_jobs.lease_seconds[n], q.lease_seconds,
                                default_lease_seconds),
                       idempotency_keys[n], coalesce(metadatas[n], '{}'::jsonb),
                       concurrency_keys[n],
                       CASE WHEN parent_failures[n] IS NOT NULL THEN 'cancelled'
                            WHEN waiting_fors[n] > 0 THEN 'waiting'
                            ELSE 'queued' END::jobq.job_state,
                       coalesce(waiting_fors[n], 0), waiting_fors[n] IS NOT NULL,
                       coalesce(runs_on_parent_failure[n], false),
                       CASE WHEN parent_failures[n] IS NOT NULL THEN now() END,
                       parent_failures[n],
                       CASE WHEN q.ordering = 'fair' THEN coalesce(fairness_keys[n], '')
                            ELSE fairness_keys[n] END,
                       options->>'key', (options->>'period')::integer, since,
                       jobq.unique_states_mask(options),
                       coalesce(timeouts[n], q.timeout_seconds), start_bys[n],
                       traceparents[n], tracestates[n]
                  FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = insert_jobs.queue
                -- any unique index: the idempotency key's and the uniqueness's
                ON CONFLICT DO NOTHING
                RETURNING j.* INTO made;
                IF FOUND THEN
                    IF made.state = 'queued' THEN
                        PERFORM jobq.announce_due(made.queue, made.run_at, 1);
                    END IF;
                    deduplicated := false;
                    EXIT;
                END IF;
                deduplicated := true;
                SELECT * INTO made FROM jobq.jobs e
                 WHERE e.queue = insert_jobs.queue AND e.idempotency_key = idempotency_keys[n];
                IF NOT FOUND AND options IS NOT NULL THEN
                    SELECT * INTO made
                      FROM jobq.unique_holder(insert_jobs.queue, types[n], options->>'key',
                                              since);
                    IF FOUND AND options->>'on_conflict' = 'replace' THEN
                        UPDATE jobq.jobs j
                           SET payload = coalesce(payloads[n], 'null'::jsonb),
                               run_at = coalesce(run_ats[n],
                                                 now() + make_interval(secs => coalesce(delays[n], 0))),
                               updated_at = now()
                         WHERE j.id = made.id AND j.state = 'queued'
                        RETURNING j.* INTO holder;
                        IF FOUND THEN
                            PERFORM jobq.announce_due(holder.queue, holder.run_at, 1);
                            made := holder;
                            replaced := true;
                        ELSIF made.state = 'queued' THEN
                            CONTINUE;  -- leased meanwhile: look again
                        END IF;
                    END IF;
                END IF;
                EXIT WHEN made.id IS NOT NULL;
                made := NULL;
            END LOOP;
            id := made.id;
            state := made.state;
            IF cardinality(types) = 1 THEN
                job := made;
            END IF;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    IF cardinality(types) = 1 THEN
        -- One job (a single enqueue): a plain INSERT, which PostgreSQL sets up for a
        -- fraction of the batch's statement below (its CTEs and joins are set up afresh
        -- on every execution). It makes the job if it fits and its key is free; else the
        -- statement below answers, as for a batch (the job holding the key, the refusal).
        INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, state, waiting_for, has_parents,
                                    run_on_parent_failure, finished_at, last_error,
                                    fairness_key, timeout_seconds, start_by, traceparent,
                                    tracestate)
        SELECT insert_jobs.queue, types[1], coalesce(payloads[1], 'null'::jsonb),
               priorities[1],
               coalesce(run_ats[1], now() + make_interval(secs => coalesce(delays[1], 0))),
               coalesce(insert_jobs.max_attempts[1], q.max_attempts, default_max_attempts),
               coalesce(insert_jobs.lease_seconds[1], q.lease_seconds, default_lease_seconds),
               idempotency_keys[1], coalesce(metadatas[1], '{}'::jsonb), concurrency_keys[1],
               CASE WHEN parent_failures[1] IS NOT NULL THEN 'cancelled'
                    WHEN waiting_fors[1] > 0 THEN 'waiting'
                    ELSE 'queued' END::jobq.job_state,
               coalesce(waiting_fors[1], 0), waiting_fors[1] IS NOT NULL,
               coalesce(runs_on_parent_failure[1], false),
               CASE WHEN parent_failures[1] IS NOT NULL THEN now() END, parent_failures[1],
               CASE WHEN q.ordering = 'fair' THEN coalesce(fairness_keys[1], '')
                    ELSE fairness_keys[1] END,
               coalesce(timeouts[1], q.timeout_seconds), start_bys[1], traceparents[1],
               tracestates[1]
          FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = insert_jobs.queue
         WHERE q.max_backlog IS NULL
            OR NOT EXISTS (SELECT FROM jobq.backlog_refusal(insert_jobs.queue, idempotency_keys))
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING j.* INTO made;
        IF FOUND THEN
            IF made.state = 'queued' THEN
                PERFORM jobq.announce_due(made.queue, made.run_at, 1);
            END IF;
            ord := 1;
            id := made.id;
            state := made.state;
            deduplicated := false;
            job := made;
            replaced := false;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;

    RETURN QUERY
    WITH input AS MATERIALIZED (
        SELECT nextval('jobq.jobs_id_seq') AS id, i.*
          FROM unnest(types, payloads, priorities, run_ats, delays,
                      insert_jobs.max_attempts, insert_jobs.lease_seconds, idempotency_keys,
                      metadatas, concurrency_keys, waiting_fors, runs_on_parent_failure,
                      parent_failures, fairness_keys, timeouts, start_bys, traceparents,
                      tracestates)
               WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, waiting_for, run_on_parent_failure,
                                    parent_failure, fairness_key, timeout_seconds,
                                    start_by, traceparent, tracestate, ord)
    ),
    policy AS MATERIALIZED (
        -- the queue's own defaults, where its settings have them
        SELECT q.max_attempts, q.lease_seconds, q.ordering, q.timeout_seconds
          FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = insert_jobs.queue
    ),
    refused AS MATERIALIZED (
        SELECT * FROM jobq.backlog_refusal(insert_jobs.queue, idempotency_keys)
    ),
    inserted AS (
        INSERT INTO jobq.jobs AS j (id, queue, type, payload, priority, run_at, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, state, waiting_for, has_parents,
                                    run_on_parent_failure, finished_at, last_error,
                                    fairness_key, timeout_seconds, start_by, traceparent,
                                    tracestate)
        SELECT i.id, insert_jobs.queue, i.type, coalesce(i.payload, 'null'::jsonb),
               i.priority,
               coalesce(i.run_at, now() + make_interval(secs => coalesce(i.delay, 0))),
               coalesce(i.max_attempts, policy.max_attempts, default_max_attempts),
               coalesce(i.lease_seconds, policy.lease_seconds, default_lease_seconds),
               i.idempotency_key, coalesce(i.metadata, '{}'::jsonb), i.concurrency_key,
               CASE WHEN i.parent_failure IS NOT NULL THEN 'cancelled'
                    WHEN i.waiting_for > 0 THEN 'waiting'
                    ELSE 'queued' END::jobq.job_state,
               coalesce(i.waiting_for, 0), i.waiting_for IS NOT NULL,
               coalesce(i.run_on_parent_failure, false),
               CASE WHEN i.parent_failure IS NOT NULL THEN now() END, i.parent_failure,
               CASE WHEN policy.ordering = 'fair' THEN coalesce(i.fairness_key, '')
                    ELSE i.fairness_key END,
               coalesce(i.timeout_seconds, policy.timeout_seconds), i.start_by,
               i.traceparent, i.tracestate
          FROM input i CROSS JOIN policy
         WHERE NOT EXISTS (SELECT FROM refused)
         ORDER BY i.ord
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
            DO NOTHING
        -- a batch is answered by each job's id and state: the whole row only for one job
        RETURNING j.id, j.queue, j.idempotency_key, j.state, j.run_at,
                  CASE WHEN cardinality(types) = 1 THEN j END AS whole
    ),
    announced AS MATERIALIZED (
        SELECT jobq.announce_due(n.queue, min(n.run_at), count(*))
          FROM inserted n
         WHERE n.state = 'queued'
         GROUP BY n.queue
    )
    SELECT i.ord::integer,
           coalesce(mine.id, sibling.id, earlier.id),
           coalesce(mine.state, sibling.state, earlier.state),
           mine.id IS NULL,
           CASE WHEN cardinality(types) = 1 THEN coalesce(mine.whole, earlier) END,
           refused.max_backlog, refused.backlog, refused.new_jobs, false
      FROM input i
      LEFT JOIN refused ON true
      LEFT JOIN inserted mine ON mine.id = i.id
      LEFT JOIN inserted sibling
             ON mine.id IS NULL AND sibling.idempotency_key = i.idempotency_key
      LEFT JOIN jobq.jobs earlier
             ON mine.id IS NULL AND sibling.id IS NULL
            AND earlier.queue = insert_jobs.queue AND earlier.idempotency_key = i.idempotency_key
     CROSS JOIN (SELECT count(*) FROM announced) AS announcements
     ORDER BY i.ord;
END
$$;

DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
    integer, integer, text, jsonb, bigint[], text, text, text[], text[], text, text, integer, text[], text,
    integer, timestamptz);

-- Since 0037: `traceparent` and `tracestate`, checked by jobq.check_trace, stored with
-- the job.
CREATE FUNCTION jobq.enqueue(
    queue text,
    type text,
    payload jsonb DEFAULT NULL,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    delay_seconds double precision DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    lease_seconds integer DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    metadata jsonb DEFAULT '{}',
    depends_on bigint[] DEFAULT NULL,
    on_parent_failure text DEFAULT 'cancel',
    concurrency_key text DEFAULT NULL,
    parent_queues text[] DEFAULT NULL,
    parent_queue_patterns text[] DEFAULT NULL,
    fairness_key text DEFAULT NULL,
    unique_key text DEFAULT NULL,
    unique_period integer DEFAULT NULL,
    unique_states text[] DEFAULT NULL,
    unique_on_conflict text DEFAULT NULL,
    timeout_seconds integer DEFAULT NULL,
    start_by timestamptz DEFAULT NULL,
    traceparent text DEFAULT NULL,
    tracestate text DEFAULT NULL
)
RETURNS TABLE (id bigint, state jobq.job_state, deduplicated boolean, replaced boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    limits jobq.enqueue_limits;
    parents bigint[] := ARRAY(SELECT DISTINCT unnest(coalesce(depends_on, '{}')));
    found_parents bigint[];
    found_states text[];
    pending integer := 0;
    failed_parent bigint;
    failed_state text;
    new_depth integer := 0;
    refusal record;
    made record;
    -- the options as the API takes them (NULL: none)
    options jsonb := CASE WHEN num_nonnulls(unique_key, unique_period, unique_states,
                                            unique_on_conflict) > 0
                          THEN jsonb_strip_nulls(jsonb_build_object(
                                   'key', unique_key, 'period', unique_period,
                                   'states', to_jsonb(unique_states),
                                   'on_conflict', unique_on_conflict)) END;
BEGIN
    SELECT * INTO limits FROM jobq.enqueue_limits_for(enqueue.queue);
    PERFORM jobq.check_job(limits, queue, type, payload, priority, run_at, delay_seconds,
                           max_attempts, lease_seconds, idempotency_key, metadata,
                           on_parent_failure, concurrency_key, cardinality(parents));
    PERFORM jobq.check_fairness_key(fairness_key, 'fairness_key');
    PERFORM jobq.check_lifecycle(timeout_seconds, start_by, '');
    PERFORM jobq.check_trace(enqueue.traceparent, enqueue.tracestate, '');
    PERFORM jobq.check_unique(options);

    IF cardinality(parents) > 0 THEN
        -- Before its parents are read: the job already holding the key, whatever its
        -- state, is the answer; then a full queue refuses it.
        IF idempotency_key IS NOT NULL THEN
            RETURN QUERY
                SELECT j.id, j.state, true, false FROM jobq.jobs j
                 WHERE j.queue = enqueue.queue AND j.idempotency_key = enqueue.idempotency_key;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        SELECT * INTO refusal
          FROM jobq.backlog_refusal(enqueue.queue,
                                    jobq.new_job_keys(enqueue.queue, ARRAY[type],
                                                      ARRAY[NULL::text], ARRAY[options]));
        IF FOUND THEN
            RAISE EXCEPTION 'queue % already holds its max_backlog of % unfinished jobs',
                enqueue.queue, refusal.max_backlog
                USING ERRCODE = 'JQ429', DETAIL = 'queue';
        END IF;

        -- The parents as they are now, read without a lock and left unwritten: the
        -- check at commit (check_new_dependencies) settles whatever changes before it.
        -- A parent in a queue the caller may not read is no job at all.
        SELECT array_agg(p.id ORDER BY p.id), array_agg(p.state::text ORDER BY p.id),
               -- not yet satisfied: not succeeded, or (for a job that runs after
               -- failed parents too) not finished at all
               count(*) FILTER (WHERE p.state <> 'succeeded'
                                  AND (on_parent_failure = 'cancel'
                                       OR p.state NOT IN ('failed', 'cancelled'))),
               min(p.id) FILTER (WHERE p.state IN ('failed', 'cancelled')),
               min(p.state::text) FILTER (WHERE p.state IN ('failed', 'cancelled'))
          INTO found_parents, found_states, pending, failed_parent, failed_state
          FROM jobq.jobs p
         WHERE p.id = ANY(parents)
           AND (parent_queues IS NULL OR p.queue = ANY(parent_queues)
                OR p.queue LIKE ANY(coalesce(parent_queue_patterns, '{}')));
        IF coalesce(cardinality(found_parents), 0) < cardinality(parents) THEN
            RAISE EXCEPTION 'depends_on: no job has id %',
                (SELECT min(p) FROM unnest(parents) AS p
                  WHERE p <> ALL(coalesce(found_parents, '{}')))
                USING ERRCODE = 'JQ422', DETAIL = 'depends_on';
        END IF;
        new_depth := 1 + coalesce((SELECT max(d.depth) FROM jobq.job_dependencies d
                                WHERE d.child_id = ANY(parents)), 0);
        IF new_depth > limits.max_dependency_depth THEN
            RAISE EXCEPTION 'depends_on: a job may stand at most % jobs below the first of its chain',
                limits.max_dependency_depth
                USING ERRCODE = 'JQ422', DETAIL = 'depends_on';
        END IF;
        IF on_parent_failure = 'run' THEN
            failed_parent := NULL;  -- it runs once every parent has finished, however
        END IF;
    END IF;

    SELECT f.id, f.state, f.deduplicated, f.refused_max_backlog, f.replaced
      INTO made
      FROM jobq.insert_jobs(
               enqueue.queue, ARRAY[type], ARRAY[payload], ARRAY[priority], ARRAY[run_at],
               ARRAY[delay_seconds], ARRAY[max_attempts], ARRAY[lease_seconds],
               ARRAY[idempotency_key], ARRAY[metadata], ARRAY[concurrency_key],
               limits.default_max_attempts, limits.default_lease_seconds,
               waiting_fors => CASE WHEN cardinality(parents) > 0 THEN ARRAY[pending] END,
               runs_on_parent_failure => ARRAY[on_parent_failure = 'run'],
               parent_failures => ARRAY[CASE WHEN failed_parent IS NOT NULL
                                             THEN jobq.parent_failed(failed_parent,
                                                                     failed_state) END],
               fairness_keys => ARRAY[fairness_key],
               uniques => ARRAY[options],
               timeouts => ARRAY[timeout_seconds], start_bys => ARRAY[start_by],
               traceparents => ARRAY[enqueue.traceparent],
               tracestates => ARRAY[enqueue.tracestate]
           ) AS f;
    IF made.refused_max_backlog IS NOT NULL THEN
        RAISE EXCEPTION 'queue % already holds its max_backlog of % unfinished jobs',
            enqueue.queue, made.refused_max_backlog
            USING ERRCODE = 'JQ429', DETAIL = 'queue';
    END IF;
    IF made.id IS NULL AND options IS NOT NULL THEN
        RAISE EXCEPTION 'the job holding this uniqueness keeps changing; try again'
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF made.id IS NULL THEN  -- another transaction took the key meanwhile, and committed
        RETURN QUERY
            SELECT j.id, j.state, true, false FROM jobq.jobs j
             WHERE j.queue = enqueue.queue AND j.idempotency_key = enqueue.idempotency_key;
        RETURN;
    END IF;

    IF cardinality(parents) > 0 AND NOT made.deduplicated THEN
        -- as the parents were read above (the count is of that read too)
        INSERT INTO jobq.job_dependencies (child_id, parent_id, resolved, depth)
        SELECT made.id, f.id,
               f.state = 'succeeded'
               OR (on_parent_failure = 'run' AND f.state IN ('failed', 'cancelled')),
               new_depth
          FROM unnest(found_parents, found_states) AS f(id, state);
    END IF;
    RETURN QUERY SELECT made.id, made.state, made.deduplicated, made.replaced;
END
$$;

-- jobq.enqueue_many (0030's) reads an item's `trace` object.
CREATE OR REPLACE FUNCTION jobq.enqueue_many(queue text, jobs jsonb,
                                  parent_queues text[] DEFAULT NULL,
                                  parent_queue_patterns text[] DEFAULT NULL)
RETURNS TABLE (ord integer, id bigint, state jobq.job_state, deduplicated boolean,
               replaced boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    limits jobq.enqueue_limits;
    item jsonb;
    position integer := 0;
    ids bigint[] := '{}';
    parents bigint[];
    parent jsonb;
    ref integer;
    created record;
    admission record;
    edges integer;
BEGIN
    IF jobs IS NULL OR jsonb_typeof(jobs) <> 'array' THEN
        RAISE EXCEPTION 'jobs must be a JSON array' USING ERRCODE = 'JQ422', DETAIL = 'jobs';
    END IF;
    SELECT * INTO limits FROM jobq.enqueue_limits_for(enqueue_many.queue);
    IF jsonb_array_length(jobs) > limits.max_batch_jobs THEN
        RAISE EXCEPTION 'a batch holds at most % jobs', limits.max_batch_jobs
            USING ERRCODE = 'JQ422', DETAIL = 'jobs';
    END IF;
    SELECT coalesce(sum(jsonb_array_length(i.job->'depends_on')), 0) INTO edges
      FROM jsonb_array_elements(jobs) AS i(job)
     WHERE jsonb_typeof(i.job) = 'object' AND jsonb_typeof(i.job->'depends_on') = 'array';
    IF edges > limits.max_batch_dependencies THEN
        RAISE EXCEPTION 'a batch''s items name at most % parents in all (depends_on), not %',
            limits.max_batch_dependencies, edges
            USING ERRCODE = 'JQ422', DETAIL = 'jobs';
    END IF;
    FOR item IN SELECT value FROM jsonb_array_elements(jobs) LOOP
        IF jsonb_typeof(item) = 'object' THEN
            PERFORM jobq.check_unique(item->'unique', format('jobs.%s.unique', position));
        END IF;
        position := position + 1;
    END LOOP;
    position := 0;
    -- All or nothing: the whole batch is admitted before its first job is made.
    SELECT * INTO admission
      FROM jobq.backlog_refusal(
               enqueue_many.queue,
               (SELECT jobq.new_job_keys(enqueue_many.queue,
                                         array_agg(i.job->>'type' ORDER BY i.n),
                                         array_agg(i.job->>'idempotency_key' ORDER BY i.n),
                                         array_agg(nullif(i.job->'unique', 'null') ORDER BY i.n))
                  FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, n)));
    IF FOUND THEN
        RAISE EXCEPTION 'the batch''s % new jobs do not fit in queue %', admission.new_jobs,
            enqueue_many.queue
            USING ERRCODE = 'JQ429', DETAIL = 'jobs';
    END IF;
    IF NOT EXISTS (SELECT FROM jsonb_array_elements(jobs) AS i(job)
                    WHERE jsonb_typeof(i.job) <> 'object' OR i.job ? 'depends_on') THEN
        -- No job depends on another: each is checked, then all are made in one statement.
        position := 0;
        FOR item IN SELECT value FROM jsonb_array_elements(jobs) LOOP
            PERFORM jobq.check_job(limits, enqueue_many.queue, item->>'type', item->'payload',
                                   coalesce((item->>'priority')::integer, 0),
                                   (item->>'run_at')::timestamptz,
                                   (item->>'delay_seconds')::double precision,
                                   (item->>'max_attempts')::integer,
                                   (item->>'lease_seconds')::integer, item->>'idempotency_key',
                                   coalesce(item->'metadata', '{}'),
                                   coalesce(item->>'on_parent_failure', 'cancel'),
                                   item->>'concurrency_key', 0);
            PERFORM jobq.check_fairness_key(item->>'fairness_key',
                                            format('jobs.%s.fairness_key', position));
            PERFORM jobq.check_lifecycle((item->>'timeout_seconds')::integer,
                                         (item->>'start_by')::timestamptz,
                                         format('jobs.%s.', position));
            PERFORM jobq.check_trace_of(item->'trace', format('jobs.%s.trace', position));
            position := position + 1;
        END LOOP;
        FOR created IN
            SELECT f.ord, f.id AS job_id, f.state AS job_state, f.deduplicated,
                   f.refused_new_jobs, f.replaced
              FROM (SELECT array_agg(i.job->>'type' ORDER BY i.n) AS types,
                           array_agg(i.job->'payload' ORDER BY i.n) AS payloads,
                           array_agg(coalesce((i.job->>'priority')::integer, 0) ORDER BY i.n)
                               AS priorities,
                           array_agg((i.job->>'run_at')::timestamptz ORDER BY i.n) AS run_ats,
                           array_agg((i.job->>'delay_seconds')::double precision ORDER BY i.n)
                               AS delays,
                           array_agg((i.job->>'max_attempts')::integer ORDER BY i.n)
                               AS max_attempts,
                           array_agg((i.job->>'lease_seconds')::integer ORDER BY i.n)
                               AS lease_seconds,
                           array_agg(i.job->>'idempotency_key' ORDER BY i.n) AS keys,
                           array_agg(coalesce(i.job->'metadata', '{}') ORDER BY i.n) AS metadatas,
                           array_agg(i.job->>'concurrency_key' ORDER BY i.n) AS concurrency_keys,
                           array_agg(coalesce(i.job->>'on_parent_failure', 'cancel') = 'run'
                                     ORDER BY i.n) AS runs_on_parent_failure,
                           array_agg(i.job->>'fairness_key' ORDER BY i.n) AS fairness_keys,
                           array_agg(nullif(i.job->'unique', 'null') ORDER BY i.n) AS uniques,
                           array_agg((i.job->>'timeout_seconds')::integer ORDER BY i.n)
                               AS timeouts,
                           array_agg((i.job->>'start_by')::timestamptz ORDER BY i.n)
                               AS start_bys,
                           array_agg(i.job->'trace'->>'traceparent' ORDER BY i.n)
                               AS traceparents,
                           array_agg(i.job->'trace'->>'tracestate' ORDER BY i.n)
                               AS tracestates
                      FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, n)) AS a
             CROSS JOIN LATERAL jobq.insert_jobs(
                       enqueue_many.queue, a.types, a.payloads, a.priorities, a.run_ats,
                       a.delays, a.max_attempts, a.lease_seconds, a.keys, a.metadatas,
                       a.concurrency_keys, limits.default_max_attempts,
                       limits.default_lease_seconds,
                       runs_on_parent_failure => a.runs_on_parent_failure,
                       fairness_keys => a.fairness_keys,
                       uniques => a.uniques, timeouts => a.timeouts,
                       start_bys => a.start_bys, traceparents => a.traceparents,
                       tracestates => a.tracestates) AS f
             ORDER BY f.ord
        LOOP
            IF created.refused_new_jobs IS NOT NULL THEN
                RAISE EXCEPTION 'the batch''s % new jobs do not fit in queue %',
                    created.refused_new_jobs, enqueue_many.queue
                    USING ERRCODE = 'JQ429', DETAIL = 'jobs';
            END IF;
            ord := created.ord - 1;
            id := created.job_id;
            state := created.job_state;
            deduplicated := created.deduplicated;
            replaced := created.replaced;
            IF id IS NULL AND jobs->ord->'unique' IS NOT NULL THEN
                RAISE EXCEPTION 'the job holding jobs[%]''s uniqueness keeps changing; try again', ord
                    USING ERRCODE = 'serialization_failure';
            END IF;
            IF id IS NULL THEN  -- another transaction took the key meanwhile, and committed
                SELECT j.id, j.state INTO id, state
                  FROM jobq.jobs j
                 WHERE j.queue = enqueue_many.queue
                   AND j.idempotency_key = jobs->ord->>'idempotency_key';
            END IF;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    FOR item IN SELECT value FROM jsonb_array_elements(jobs) LOOP
        IF jsonb_typeof(item) <> 'object' THEN
            RAISE EXCEPTION 'jobs[%] must be a JSON object', position
                USING ERRCODE = 'JQ422', DETAIL = format('jobs.%s', position);
        END IF;
        PERFORM jobq.check_trace_of(item->'trace', format('jobs.%s.trace', position));
        parents := '{}';
        FOR parent IN SELECT value FROM jsonb_array_elements(coalesce(item->'depends_on', '[]'))
        LOOP
            IF jsonb_typeof(parent) = 'number' THEN
                parents := parents || (parent #>> '{}')::bigint;
            ELSE
                ref := (parent->>'ref')::integer;
                IF ref IS NULL OR ref < 0 OR ref >= position THEN
                    RAISE EXCEPTION 'jobs[%].depends_on: a ref must name an earlier item of the batch', position
                        USING ERRCODE = 'JQ422', DETAIL = format('jobs.%s.depends_on', position);
                END IF;
                parents := parents || ids[ref + 1];
            END IF;
        END LOOP;
        SELECT * INTO created FROM jobq.enqueue(
            queue => enqueue_many.queue,
            type => item->>'type',
            payload => item->'payload',
            priority => coalesce((item->>'priority')::integer, 0),
            run_at => (item->>'run_at')::timestamptz,
            delay_seconds => (item->>'delay_seconds')::double precision,
            max_attempts => (item->>'max_attempts')::integer,
            lease_seconds => (item->>'lease_seconds')::integer,
            idempotency_key => item->>'idempotency_key',
            metadata => coalesce(item->'metadata', '{}'),
            depends_on => parents,
            on_parent_failure => coalesce(item->>'on_parent_failure', 'cancel'),
            concurrency_key => item->>'concurrency_key',
            fairness_key => item->>'fairness_key',
            timeout_seconds => (item->>'timeout_seconds')::integer,
            start_by => (item->>'start_by')::timestamptz,
            traceparent => item->'trace'->>'traceparent',
            tracestate => item->'trace'->>'tracestate',
            -- the batch's own items are the caller's, whatever their queue
            parent_queues => CASE WHEN parent_queues IS NULL THEN NULL
                                  ELSE parent_queues || enqueue_many.queue END,
            parent_queue_patterns => parent_queue_patterns,
            unique_key => item->'unique'->>'key',
            unique_period => (item->'unique'->>'period')::integer,
            unique_states => CASE WHEN jsonb_typeof(item->'unique'->'states') = 'array'
                                  THEN ARRAY(SELECT jsonb_array_elements_text(
                                                        item->'unique'->'states')) END,
            unique_on_conflict => item->'unique'->>'on_conflict');
        ids := ids || created.id;
        ord := position;
        id := created.id;
        state := created.state;
        deduplicated := created.deduplicated;
        replaced := created.replaced;
        RETURN NEXT;
        position := position + 1;
    END LOOP;
END
$$;

-- Producers enqueue through jobq.enqueue and jobq.enqueue_many; the other functions are
-- for the roles that use the schema's tables (the service's), as 0030 left them.
DO $$
DECLARE
    function regprocedure;
    grantee text;
BEGIN
    FOR function IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'jobq'::regnamespace
           AND p.proname IN ('check_trace', 'check_trace_of', 'insert_jobs', 'enqueue',
                             'enqueue_many')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', function);
        FOR grantee IN
            SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
             WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs' AND g.grantee <> 'PUBLIC'
               AND g.grantee::text <> current_user
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', function, grantee);
        END LOOP;
    END LOOP;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text, text[],
            text[], text, text, integer, text[], text, integer, timestamptz, text, text)
            TO jobq_producer;
        GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb, text[], text[]) TO jobq_producer;
    END IF;
END
$$;
