-- The limits `jobq serve` runs with (it writes its settings here at startup); until it
-- has, jobq's defaults.
CREATE TABLE jobq.enqueue_limits (
    one                   boolean PRIMARY KEY DEFAULT true CHECK (one),
    default_max_attempts  integer NOT NULL DEFAULT 5,
    default_lease_seconds integer NOT NULL DEFAULT 60,
    max_lease_seconds     integer NOT NULL DEFAULT 43200,
    max_payload_bytes     integer NOT NULL DEFAULT 262144,
    max_json_depth        integer NOT NULL DEFAULT 32,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
INSERT INTO jobq.enqueue_limits DEFAULT VALUES;

-- The limits and defaults an enqueue into `queue` applies: the service's, with the
-- queue's own default attempts and lease where its settings have them.
CREATE FUNCTION jobq.enqueue_limits_for(queue text)
RETURNS jobq.enqueue_limits
LANGUAGE sql STABLE
AS $$
    SELECT l.one,
           coalesce(q.max_attempts, l.default_max_attempts),
           coalesce(q.lease_seconds, l.default_lease_seconds),
           l.max_lease_seconds, l.max_payload_bytes, l.max_json_depth, l.updated_at
      FROM jobq.enqueue_limits l
      LEFT JOIN jobq.queues q ON q.name = enqueue_limits_for.queue
$$;

-- How deeply arrays and objects nest in `doc`, counting no further than `stop_after + 1`.
CREATE FUNCTION jobq.json_depth(doc jsonb, stop_after integer)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    level integer := 1;
    frontier jsonb[] := ARRAY[doc];
BEGIN
    IF doc IS NULL OR jsonb_typeof(doc) NOT IN ('array', 'object') THEN
        RETURN 0;
    END IF;
    LOOP
        frontier := ARRAY(
            SELECT c.child
              FROM unnest(frontier) AS f(node)
             CROSS JOIN LATERAL (
                    SELECT value FROM jsonb_array_elements(
                        CASE WHEN jsonb_typeof(f.node) = 'array' THEN f.node ELSE '[]' END)
                    UNION ALL
                    SELECT value FROM jsonb_each(
                        CASE WHEN jsonb_typeof(f.node) = 'object' THEN f.node ELSE '{}' END)
                   ) AS c(child)
             WHERE jsonb_typeof(c.child) IN ('array', 'object'));
        EXIT WHEN cardinality(frontier) = 0 OR level > stop_after;
        level := level + 1;
    END LOOP;
    RETURN level;
END
$$;

-- Enqueue one job, as `POST /v1/queues/{queue}/jobs` does: the same defaults, limits,
-- idempotency and wake-up, and the job exists if and only if the caller's transaction
-- commits. Refusals raise SQLSTATE JQ422 (invalid: the field is the DETAIL), JQ413 (too
-- large) or JQ429 (the queue is full). `depends_on` names the jobs it waits for.
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
    concurrency_key text DEFAULT NULL
)
RETURNS TABLE (id bigint, state jobq.job_state, deduplicated boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    limits jobq.enqueue_limits;
    name_pattern CONSTANT text := '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';
    parents bigint[] := ARRAY(SELECT DISTINCT unnest(coalesce(depends_on, '{}')));
    found_parents bigint[];
    pending integer := 0;
    failed_parent bigint;
    failed_state text;
    new_state jobq.job_state;
    due timestamptz;
    admission record;
    new_id bigint;
BEGIN
    SELECT * INTO limits FROM jobq.enqueue_limits_for(enqueue.queue);
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
    IF cardinality(parents) > 10000 THEN
        RAISE EXCEPTION 'depends_on names at most 10000 jobs'
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

    -- The job already holding the key, whatever its state, is the answer.
    IF idempotency_key IS NOT NULL THEN
        RETURN QUERY
            SELECT j.id, j.state, true FROM jobq.jobs j
             WHERE j.queue = enqueue.queue AND j.idempotency_key = enqueue.idempotency_key;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- Admission control: only a queue with a max_backlog pays for counting.
    SELECT q.max_backlog, jobq.queue_backlog(enqueue.queue, q.max_backlog) AS backlog
      INTO admission
      FROM jobq.queues q
     WHERE q.name = enqueue.queue AND q.max_backlog IS NOT NULL;
    IF FOUND AND admission.backlog >= admission.max_backlog THEN
        RAISE EXCEPTION 'queue % already holds its max_backlog of % unfinished jobs',
            enqueue.queue, admission.max_backlog
            USING ERRCODE = 'JQ429', DETAIL = 'queue';
    END IF;

    -- The parents, locked and marked (a parent's finish now waits for this transaction,
    -- and then sees this job's edge), as they are now.
    IF cardinality(parents) > 0 THEN
        WITH marked AS (
            UPDATE jobq.jobs p SET has_dependents = true
             WHERE p.id = ANY(parents)
            RETURNING p.id, p.state
        )
        SELECT array_agg(m.id),
               -- not yet satisfied: not succeeded, or (for a job that runs after
               -- failed parents too) not finished at all
               count(*) FILTER (WHERE m.state <> 'succeeded'
                                  AND (on_parent_failure = 'cancel'
                                       OR m.state NOT IN ('failed', 'cancelled'))),
               min(m.id) FILTER (WHERE m.state IN ('failed', 'cancelled')),
               min(m.state::text) FILTER (WHERE m.state IN ('failed', 'cancelled'))
          INTO found_parents, pending, failed_parent, failed_state
          FROM marked m;
        IF coalesce(cardinality(found_parents), 0) < cardinality(parents) THEN
            RAISE EXCEPTION 'depends_on: no job has id %',
                (SELECT min(p) FROM unnest(parents) AS p
                  WHERE p <> ALL(coalesce(found_parents, '{}')))
                USING ERRCODE = 'JQ422', DETAIL = 'depends_on';
        END IF;
        IF on_parent_failure = 'run' THEN
            failed_parent := NULL;  -- it runs once every parent has finished, however
        END IF;
    END IF;

    due := coalesce(run_at, now() + make_interval(secs => coalesce(delay_seconds, 0)));
    new_state := CASE WHEN failed_parent IS NOT NULL THEN 'cancelled'
                      WHEN pending > 0 THEN 'waiting'
                      ELSE 'queued' END;
    INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                                lease_seconds, idempotency_key, metadata, state,
                                waiting_for, has_parents, run_on_parent_failure,
                                finished_at, last_error, concurrency_key)
    VALUES (enqueue.queue, enqueue.type, coalesce(payload, 'null'::jsonb), priority, due,
            coalesce(max_attempts, limits.default_max_attempts),
            coalesce(lease_seconds, limits.default_lease_seconds),
            idempotency_key, metadata, new_state, pending, cardinality(parents) > 0,
            on_parent_failure = 'run',
            CASE WHEN new_state = 'cancelled' THEN now() END,
            CASE WHEN new_state = 'cancelled' THEN jsonb_build_object(
                'type', 'parent_failed',
                'message', format('parent job %s ended %s', failed_parent, failed_state),
                'details', jsonb_build_object('parent_id', failed_parent,
                                              'parent_state', failed_state)) END,
            enqueue.concurrency_key)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING j.id INTO new_id;
    IF new_id IS NULL THEN  -- another transaction took the key meanwhile, and committed
        RETURN QUERY
            SELECT j.id, j.state, true FROM jobq.jobs j
             WHERE j.queue = enqueue.queue AND j.idempotency_key = enqueue.idempotency_key;
        RETURN;
    END IF;

    IF cardinality(parents) > 0 THEN
        INSERT INTO jobq.job_dependencies (child_id, parent_id, resolved)
        SELECT new_id, p.id,
               p.state = 'succeeded'
               OR (on_parent_failure = 'run' AND p.state IN ('failed', 'cancelled'))
          FROM jobq.jobs p
         WHERE p.id = ANY(parents);
    END IF;
    IF new_state = 'queued' THEN
        PERFORM jobq.announce_due(enqueue.queue, due, 1);
    END IF;
    RETURN QUERY SELECT new_id, new_state, false;
END
$$;

-- Enqueue a batch into one queue, as `POST /v1/queues/{queue}/jobs/batch` does: `jobs`
-- is its JSON array; an item's `depends_on` may name earlier items as {"ref": index}.
-- All or nothing: admission control counts the whole batch first.
CREATE FUNCTION jobq.enqueue_many(queue text, jobs jsonb)
RETURNS TABLE (ord integer, id bigint, state jobq.job_state, deduplicated boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    item jsonb;
    position integer := 0;
    ids bigint[] := '{}';
    parents bigint[];
    parent jsonb;
    ref integer;
    created record;
    admission record;
    new_jobs integer;
BEGIN
    IF jobs IS NULL OR jsonb_typeof(jobs) <> 'array' THEN
        RAISE EXCEPTION 'jobs must be a JSON array' USING ERRCODE = 'JQ422', DETAIL = 'jobs';
    END IF;
    SELECT q.max_backlog, jobq.queue_backlog(enqueue_many.queue, q.max_backlog) AS backlog
      INTO admission
      FROM jobq.queues q
     WHERE q.name = enqueue_many.queue AND q.max_backlog IS NOT NULL;
    IF FOUND THEN
        SELECT count(*) INTO new_jobs
          FROM jsonb_array_elements(jobs) AS i(job)
         WHERE NOT EXISTS (SELECT FROM jobq.jobs e
                            WHERE e.queue = enqueue_many.queue
                              AND e.idempotency_key = i.job->>'idempotency_key');
        IF new_jobs > 0 AND admission.backlog + new_jobs > admission.max_backlog THEN
            RAISE EXCEPTION 'the batch''s % new jobs do not fit in queue %', new_jobs,
                enqueue_many.queue
                USING ERRCODE = 'JQ429', DETAIL = 'jobs';
        END IF;
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
            concurrency_key => item->>'concurrency_key');
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

-- Producers that share the database enqueue through the functions only.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        CREATE ROLE jobq_producer NOLOGIN;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'jobq_producer was not created (the migrating role may not create roles)';
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        GRANT USAGE ON SCHEMA jobq TO jobq_producer;
        GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text) TO jobq_producer;
        GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb) TO jobq_producer;
    END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
    double precision, integer, integer, text, jsonb, bigint[], text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb) FROM PUBLIC;
