-- Migration 0023: one enqueue. (See 0023_one_enqueue.py for what each part is for.)

-- Admission control, all or nothing: jobs with these idempotency keys (one entry a job,
-- NULL: no key) fit in the queue unless it has a max_backlog that its backlog and their
-- new jobs (keys no job of the queue holds, each counted once) would pass. A row: the
-- refusal; none: they fit. Only a queue with a max_backlog pays for counting.
CREATE FUNCTION jobq.backlog_refusal(queue text, keys text[])
RETURNS TABLE (max_backlog integer, backlog bigint, new_jobs bigint)
-- PL/pgSQL, not SQL: it keeps its plan, and a statement that calls it holds one call
-- (a single enqueue's INSERT would set up an inlined query on every execution). ROWS 1:
-- at most one, and a batch's plan that counted on a thousand would cost enough for
-- PostgreSQL to compile it (JIT), a second a statement.
LANGUAGE plpgsql STABLE
ROWS 1
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT a.max_backlog, a.backlog, a.new_jobs
      FROM (SELECT q.max_backlog, jobq.queue_backlog(q.name, q.max_backlog) AS backlog,
                   (SELECT count(DISTINCT k.key) + count(*) FILTER (WHERE k.key IS NULL)
                      FROM unnest(keys) AS k(key)
                     WHERE NOT EXISTS (SELECT FROM jobq.jobs e
                                        WHERE e.queue = q.name AND e.idempotency_key = k.key)
                   ) AS new_jobs
              FROM jobq.queues q
             WHERE q.name = backlog_refusal.queue AND q.max_backlog IS NOT NULL
            OFFSET 0  -- each count once (not once for each place the WHERE names it)
           ) AS a
     WHERE a.new_jobs > 0 AND a.backlog + a.new_jobs > a.max_backlog;
END
$$;

-- The one enqueue: jobs into one queue, the arrays one entry a job (unnest's columns),
-- checked by the caller. Each job's own max_attempts and lease_seconds, else the
-- queue's settings, else the defaults given; its run_at, else now + its delay. All or
-- nothing under the queue's max_backlog (jobq.backlog_refusal); a job whose key a job
-- of the queue holds (or an earlier one of the same call) is answered by that job.
-- Jobs made `queued` are announced (jobq.announce_due), delivered at commit.
-- A job with parents (jobq.enqueue) comes with how many of them it waits for, whether
-- it runs after a failed one, and the parent_failed error it is born cancelled with.
-- One row a job, in order: its id and state (NULL: its key changed hands meanwhile, or
-- the batch was refused), whether another job held its key, the whole job for a call
-- of one job, and the refusal (on every row).
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
    parent_failures jsonb[] DEFAULT NULL
)
RETURNS TABLE (ord integer, id bigint, state jobq.job_state, deduplicated boolean,
               job jobq.jobs, refused_max_backlog integer, refused_backlog bigint,
               refused_new_jobs bigint)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    made jobq.jobs;
BEGIN
    IF cardinality(types) = 1 THEN
        -- One job (a single enqueue): a plain INSERT, which PostgreSQL sets up for a
        -- fraction of the batch's statement below (its CTEs and joins are set up afresh
        -- on every execution). It makes the job if it fits and its key is free; else the
        -- statement below answers, as for a batch (the job holding the key, the refusal).
        INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, state, waiting_for, has_parents,
                                    run_on_parent_failure, finished_at, last_error)
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
               CASE WHEN parent_failures[1] IS NOT NULL THEN now() END, parent_failures[1]
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
                      parent_failures)
               WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, waiting_for, run_on_parent_failure,
                                    parent_failure, ord)
    ),
    policy AS MATERIALIZED (
        -- the queue's own defaults, where its settings have them
        SELECT q.max_attempts, q.lease_seconds
          FROM (SELECT) AS one LEFT JOIN jobq.queues q ON q.name = insert_jobs.queue
    ),
    refused AS MATERIALIZED (
        SELECT * FROM jobq.backlog_refusal(insert_jobs.queue, idempotency_keys)
    ),
    inserted AS (
        INSERT INTO jobq.jobs AS j (id, queue, type, payload, priority, run_at, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, state, waiting_for, has_parents,
                                    run_on_parent_failure, finished_at, last_error)
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
               CASE WHEN i.parent_failure IS NOT NULL THEN now() END, i.parent_failure
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
           refused.max_backlog, refused.backlog, refused.new_jobs
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

-- Refuse a job's fields as the API's schema refuses them (`limits`: the service's, the
-- queue's defaults merged in; `parents`: how many jobs it depends on): SQLSTATE JQ422
-- (the field is the DETAIL) or JQ413 (too large).
CREATE FUNCTION jobq.check_job(limits jobq.enqueue_limits, queue text, type text,
                               payload jsonb, priority integer, run_at timestamptz,
                               delay_seconds double precision, max_attempts integer,
                               lease_seconds integer, idempotency_key text, metadata jsonb,
                               on_parent_failure text, concurrency_key text, parents integer)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    name_pattern CONSTANT text := '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';
BEGIN
    IF queue IS NULL OR queue !~ name_pattern THEN
        RAISE EXCEPTION 'queue must be 1 to 128 letters, digits and _ . : - (not first)'
            USING ERRCODE = 'JQ422', DETAIL = 'queue';
    END IF;
    IF type IS NULL OR type !~ name_pattern THEN
        RAISE EXCEPTION 'type must be 1 to 128 letters, digits and _ . : - (not first)'
            USING ERRCODE = 'JQ422', DETAIL = 'type';
    END IF;
    IF priority IS NULL OR priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767'
            USING ERRCODE = 'JQ422', DETAIL = 'priority';
    END IF;
    IF run_at IS NOT NULL AND delay_seconds IS NOT NULL THEN
        RAISE EXCEPTION 'give run_at or delay_seconds, not both'
            USING ERRCODE = 'JQ422', DETAIL = 'run_at';
    END IF;
    IF run_at IS NOT NULL AND run_at NOT BETWEEN '1970-01-01T00:00:00Z'::timestamptz
                                          AND '9999-12-30T23:59:59.999999Z'::timestamptz THEN
        RAISE EXCEPTION 'run_at must be a time from 1970-01-01T00:00:00Z to 9999-12-30T23:59:59.999999Z'
            USING ERRCODE = 'JQ422', DETAIL = 'run_at';
    END IF;
    IF delay_seconds IS NOT NULL AND delay_seconds NOT BETWEEN 0 AND 31622400 THEN
        RAISE EXCEPTION 'delay_seconds must be between 0 and 31622400'
            USING ERRCODE = 'JQ422', DETAIL = 'delay_seconds';
    END IF;
    IF max_attempts IS NOT NULL AND max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 1000'
            USING ERRCODE = 'JQ422', DETAIL = 'max_attempts';
    END IF;
    IF lease_seconds IS NOT NULL AND lease_seconds NOT BETWEEN 1 AND limits.max_lease_seconds THEN
        RAISE EXCEPTION 'lease_seconds must be between 1 and %', limits.max_lease_seconds
            USING ERRCODE = 'JQ422', DETAIL = 'lease_seconds';
    END IF;
    IF idempotency_key IS NOT NULL AND length(idempotency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'idempotency_key must be 1 to 255 characters'
            USING ERRCODE = 'JQ422', DETAIL = 'idempotency_key';
    END IF;
    IF concurrency_key IS NOT NULL AND length(concurrency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'concurrency_key must be 1 to 255 characters'
            USING ERRCODE = 'JQ422', DETAIL = 'concurrency_key';
    END IF;
    IF metadata IS NULL OR jsonb_typeof(metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object'
            USING ERRCODE = 'JQ422', DETAIL = 'metadata';
    END IF;
    IF on_parent_failure IS NULL OR on_parent_failure NOT IN ('cancel', 'run') THEN
        RAISE EXCEPTION 'on_parent_failure must be cancel or run'
            USING ERRCODE = 'JQ422', DETAIL = 'on_parent_failure';
    END IF;
    IF parents > limits.max_batch_dependencies THEN
        RAISE EXCEPTION 'depends_on names at most % jobs', limits.max_batch_dependencies
            USING ERRCODE = 'JQ422', DETAIL = 'depends_on';
    END IF;
    IF octet_length(coalesce(payload, 'null'::jsonb)::text) > limits.max_payload_bytes THEN
        RAISE EXCEPTION 'payload is over the %-byte limit', limits.max_payload_bytes
            USING ERRCODE = 'JQ413', DETAIL = 'payload';
    END IF;
    IF octet_length(metadata::text) > limits.max_payload_bytes THEN
        RAISE EXCEPTION 'metadata is over the %-byte limit', limits.max_payload_bytes
            USING ERRCODE = 'JQ413', DETAIL = 'metadata';
    END IF;
    IF jobq.json_depth(payload, limits.max_json_depth) > limits.max_json_depth
       OR jobq.json_depth(metadata, limits.max_json_depth) > limits.max_json_depth THEN
        RAISE EXCEPTION 'JSON nests more than % levels deep', limits.max_json_depth
            USING ERRCODE = 'JQ422', DETAIL = 'payload';
    END IF;
END
$$;

-- Only the service's roles call them (jobq.enqueue runs them as the schema's owner).
REVOKE EXECUTE ON FUNCTION jobq.backlog_refusal(text, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION jobq.check_job(jobq.enqueue_limits, text, text, jsonb, integer,
    timestamptz, double precision, integer, integer, text, jsonb, text, text, integer)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[],
    double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer,
    integer[], boolean[], jsonb[]) FROM PUBLIC;
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
         WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs' AND g.grantee <> 'PUBLIC'
           AND g.grantee::text <> current_user
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION jobq.backlog_refusal(text, text[]) TO %I',
                       grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION jobq.check_job(jobq.enqueue_limits, text, '
                       'text, jsonb, integer, timestamptz, double precision, integer, '
                       'integer, text, jsonb, text, text, integer) TO %I', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION jobq.insert_jobs(text, text[], jsonb[], '
                       'integer[], timestamptz[], double precision[], integer[], integer[], '
                       'text[], jsonb[], text[], integer, integer, integer[], boolean[], '
                       'jsonb[]) TO %I', grantee);
    END LOOP;
END
$$;

-- Enqueue one job, as `POST /v1/queues/{queue}/jobs` does: its fields checked here as
-- the API's schema checks them, then made by jobq.insert_jobs, as the API makes them.
-- Refusals raise SQLSTATE JQ422 (invalid: the field is the DETAIL), JQ413 (too large)
-- or JQ429 (the queue is full). `depends_on` names the jobs it waits for; with
-- `parent_queues` (names) and `parent_queue_patterns` (LIKE patterns), only jobs of
-- those queues (the HTTP caller's key's), any other answered as no job at all.
CREATE OR REPLACE FUNCTION jobq.enqueue(
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
    parent_queue_patterns text[] DEFAULT NULL
)
RETURNS TABLE (id bigint, state jobq.job_state, deduplicated boolean)
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
BEGIN
    SELECT * INTO limits FROM jobq.enqueue_limits_for(enqueue.queue);
    PERFORM jobq.check_job(limits, queue, type, payload, priority, run_at, delay_seconds,
                           max_attempts, lease_seconds, idempotency_key, metadata,
                           on_parent_failure, concurrency_key, cardinality(parents));

    IF cardinality(parents) > 0 THEN
        -- Before its parents are read: the job already holding the key, whatever its
        -- state, is the answer; then a full queue refuses it.
        IF idempotency_key IS NOT NULL THEN
            RETURN QUERY
                SELECT j.id, j.state, true FROM jobq.jobs j
                 WHERE j.queue = enqueue.queue AND j.idempotency_key = enqueue.idempotency_key;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        SELECT * INTO refusal FROM jobq.backlog_refusal(enqueue.queue, ARRAY[NULL::text]);
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

    SELECT f.id, f.state, f.deduplicated, f.refused_max_backlog
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
                                                                     failed_state) END]
           ) AS f;
    IF made.refused_max_backlog IS NOT NULL THEN
        RAISE EXCEPTION 'queue % already holds its max_backlog of % unfinished jobs',
            enqueue.queue, made.refused_max_backlog
            USING ERRCODE = 'JQ429', DETAIL = 'queue';
    END IF;
    IF made.id IS NULL THEN  -- another transaction took the key meanwhile, and committed
        RETURN QUERY
            SELECT j.id, j.state, true FROM jobq.jobs j
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
    RETURN QUERY SELECT made.id, made.state, made.deduplicated;
END
$$;

-- Enqueue a batch into one queue, as `POST /v1/queues/{queue}/jobs/batch` does: `jobs`
-- is its JSON array; an item's `depends_on` may name earlier items as {"ref": index}.
-- All or nothing: admission control counts the whole batch first. At most
-- max_batch_jobs items, and max_batch_dependencies `depends_on` entries in all.
-- `parent_queues`, `parent_queue_patterns`: as for jobq.enqueue.
CREATE OR REPLACE FUNCTION jobq.enqueue_many(queue text, jobs jsonb,
                                  parent_queues text[] DEFAULT NULL,
                                  parent_queue_patterns text[] DEFAULT NULL)
RETURNS TABLE (ord integer, id bigint, state jobq.job_state, deduplicated boolean)
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
    -- All or nothing: the whole batch is admitted before its first job is made.
    SELECT * INTO admission
      FROM jobq.backlog_refusal(enqueue_many.queue,
                                ARRAY(SELECT i.job->>'idempotency_key'
                                        FROM jsonb_array_elements(jobs) AS i(job)));
    IF FOUND THEN
        RAISE EXCEPTION 'the batch''s % new jobs do not fit in queue %', admission.new_jobs,
            enqueue_many.queue
            USING ERRCODE = 'JQ429', DETAIL = 'jobs';
    END IF;
    IF NOT EXISTS (SELECT FROM jsonb_array_elements(jobs) AS i(job)
                    WHERE jsonb_typeof(i.job) <> 'object' OR i.job ? 'depends_on') THEN
        -- No job depends on another: each is checked, then all are made in one statement.
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
        END LOOP;
        FOR created IN
            SELECT f.ord, f.id AS job_id, f.state AS job_state, f.deduplicated,
                   f.refused_new_jobs
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
                                     ORDER BY i.n) AS runs_on_parent_failure
                      FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, n)) AS a
             CROSS JOIN LATERAL jobq.insert_jobs(
                       enqueue_many.queue, a.types, a.payloads, a.priorities, a.run_ats,
                       a.delays, a.max_attempts, a.lease_seconds, a.keys, a.metadatas,
                       a.concurrency_keys, limits.default_max_attempts,
                       limits.default_lease_seconds,
                       runs_on_parent_failure => a.runs_on_parent_failure) AS f
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
            -- the batch's own items are the caller's, whatever their queue
            parent_queues => CASE WHEN parent_queues IS NULL THEN NULL
                                  ELSE parent_queues || enqueue_many.queue END,
            parent_queue_patterns => parent_queue_patterns);
        ids := ids || created.id;
        ord := position;
        id := created.id;
        state := created.state;
        deduplicated := created.deduplicated;
        RETURN NEXT;
        position := position + 1;
    END LOOP;
END
$$;
