-- The jobq schema at Alembic revision 0044, as migrating an empty database leaves it:
-- what the migrations in alembic/versions/ add up to, for reading (`jobq migrate` makes a
-- database). Written by `make schema` (tests/schema_dump.py) from pg_dump; do not edit
-- it: tests/db/test_schema_file.py fails when a fresh migration gives anything else.

--
-- Name: jobq; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA jobq;

--
-- Name: event_kind; Type: TYPE; Schema: jobq; Owner: -
--

CREATE TYPE jobq.event_kind AS ENUM (
    'enqueued',
    'started',
    'succeeded',
    'failed',
    'retrying',
    'cancelled',
    'queue_paused',
    'queue_resumed',
    'queue_settings'
);

--
-- Name: job_state; Type: TYPE; Schema: jobq; Owner: -
--

CREATE TYPE jobq.job_state AS ENUM (
    'waiting',
    'queued',
    'running',
    'succeeded',
    'failed',
    'cancelled'
);

--
-- Name: add_buckets(jsonb, jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.add_buckets(a jsonb, b jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(jsonb_object_agg(key, jobs) FILTER (WHERE jobs <> 0), '{}')
      FROM (SELECT key, sum(CAST(value AS bigint)) AS jobs
              FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b))
                   AS e
             GROUP BY key) AS s
$$;

--
-- Name: FUNCTION add_buckets(a jsonb, b jsonb); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.add_buckets(a jsonb, b jsonb) IS 'Two histograms ({"bucket": jobs}) added up.';

--
-- Name: after_job_delete(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.after_job_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.has_dependents THEN
        IF pg_trigger_depth() = 1 THEN
            PERFORM jobq.settle_dependents(ARRAY[OLD.id], ARRAY['deleted']);
        END IF;
        UPDATE jobq.jobs c
           SET last_error = jobq.parent_failed(OLD.id, 'deleted'),
               updated_at = now()
          FROM jobq.job_dependencies d
         WHERE d.parent_id = OLD.id AND NOT d.resolved AND c.id = d.child_id
           AND c.state = 'cancelled' AND c.last_error->>'type' = 'parent_failed';
        DELETE FROM jobq.job_dependencies WHERE parent_id = OLD.id;
    END IF;
    IF OLD.has_parents THEN
        DELETE FROM jobq.job_dependencies WHERE child_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: after_job_state_change(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.after_job_state_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.state IS NOT DISTINCT FROM NEW.state THEN
        RETURN NULL;  -- an update that set the state it had
    END IF;
    IF NEW.notify_finish AND NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        PERFORM pg_notify('jobq_finished', NEW.id::text);
    END IF;
    IF NEW.has_dependents AND pg_trigger_depth() = 1 THEN
        IF NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
            PERFORM jobq.settle_dependents(ARRAY[NEW.id], ARRAY[NEW.state::text]);
        ELSIF OLD.state IN ('failed', 'cancelled') THEN
            PERFORM jobq.revive_dependents(NEW.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: announce_due(text, timestamp with time zone, bigint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.announce_due(queue text, due timestamp with time zone, jobs bigint) RETURNS void
    LANGUAGE sql
    AS $$
            SELECT pg_notify('jobq_due', concat_ws(' ', queue, extract(epoch FROM due), jobs))
        $$;

--
-- Name: attempt_record(integer, uuid, text, bigint, timestamp with time zone, text, jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.attempt_record(attempt integer, lease_id uuid, worker_id text, key_id bigint, started_at timestamp with time zone, outcome text, error jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
            SELECT jsonb_build_object(
                'attempt', attempt, 'lease_id', lease_id, 'worker_id', worker_id,
                'key_id', key_id, 'started_at', started_at, 'finished_at', now(),
                'outcome', outcome, 'error', error)
        $$;

--
-- Name: jobs; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.jobs (
    id bigint NOT NULL,
    queue text NOT NULL,
    type text NOT NULL,
    payload jsonb NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    state jobq.job_state DEFAULT 'queued'::jobq.job_state NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    lease_seconds integer NOT NULL,
    lease_id uuid,
    lease_expires_at timestamp with time zone,
    current_lease_seconds integer,
    worker_id text,
    attempted_at timestamp with time zone,
    cancel_requested boolean DEFAULT false NOT NULL,
    progress_percent double precision,
    progress_stage text,
    progress_message text,
    progress_updated_at timestamp with time zone,
    result jsonb,
    last_error jsonb,
    attempts jsonb DEFAULT '[]'::jsonb NOT NULL,
    idempotency_key text,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_key_id bigint,
    waiting_for integer DEFAULT 0 NOT NULL,
    has_parents boolean DEFAULT false NOT NULL,
    has_dependents boolean DEFAULT false NOT NULL,
    run_on_parent_failure boolean DEFAULT false NOT NULL,
    notify_finish boolean DEFAULT false NOT NULL,
    concurrency_key text,
    fairness_key text,
    unique_key text,
    unique_period integer,
    unique_since timestamp with time zone,
    unique_states smallint,
    timeout_seconds integer,
    start_by timestamp with time zone,
    snoozes integer DEFAULT 0 NOT NULL,
    traceparent text,
    tracestate text,
    CONSTRAINT running_has_lease CHECK (((state <> 'running'::jobq.job_state) OR ((lease_id IS NOT NULL) AND (lease_expires_at IS NOT NULL))))
)
WITH (fillfactor='90', autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.02', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');

--
-- Name: attempts_of(jobq.jobs); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.attempts_of(job jobq.jobs) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
            SELECT CASE WHEN job.state = 'succeeded' AND job.lease_id IS NOT NULL
                        THEN job.attempts || jsonb_build_object(
    'attempt', job.attempt, 'lease_id', job.lease_id, 'worker_id', job.worker_id,
    'key_id', job.lease_key_id, 'started_at', job.attempted_at,
    'finished_at', job.finished_at, 'outcome', 'succeeded', 'error', NULL)
                        ELSE job.attempts END
        $$;

--
-- Name: FUNCTION attempts_of(job jobq.jobs); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.attempts_of(job jobq.jobs) IS 'A job''s ended attempts, as the API shows them: a succeeded job''s last one is its own columns.';

--
-- Name: backlog_refusal(text, text[]); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.backlog_refusal(queue text, keys text[]) RETURNS TABLE(max_backlog integer, backlog bigint, new_jobs bigint)
    LANGUAGE plpgsql STABLE ROWS 1
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

--
-- Name: blocking_parent(bigint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.blocking_parent(child bigint) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(
        (SELECT format('job %s waits for job %s, which %s', c.id, p.id,
                       CASE WHEN p.state = 'failed' THEN 'failed' ELSE 'was cancelled' END)
           FROM jobq.job_dependencies u
           JOIN jobq.jobs p ON p.id = u.parent_id
          WHERE u.child_id = c.id AND NOT u.resolved AND p.state IN ('failed', 'cancelled')
          ORDER BY p.id
          LIMIT 1),
        CASE WHEN c.waiting_for > (SELECT count(*) FROM jobq.job_dependencies u
                                    WHERE u.child_id = c.id AND NOT u.resolved)
             THEN format('job %s waits for a job that was deleted', c.id) END)
      FROM jobq.jobs c
     WHERE c.id = child AND c.has_parents
$$;

--
-- Name: bucket_seconds(smallint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.bucket_seconds(bucket smallint) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- the bucket's geometric middle: within 2^(1/4) (19 %) of every duration in it
    SELECT CASE WHEN bucket = 0 THEN 0.0005 ELSE 0.001 * power(2, (bucket - 0.5) / 2) END
$$;

--
-- Name: FUNCTION bucket_seconds(bucket smallint); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.bucket_seconds(bucket smallint) IS 'The duration a histogram bucket stands for (its geometric middle).';

--
-- Name: check_fairness_key(text, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_fairness_key(fairness_key text, field text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF fairness_key IS NOT NULL AND length(fairness_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'fairness_key must be 1 to 255 characters'
            USING ERRCODE = 'JQ422', DETAIL = field;
    END IF;
END
$$;

--
-- Name: enqueue_limits; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.enqueue_limits (
    one boolean DEFAULT true NOT NULL,
    default_max_attempts integer DEFAULT 5 NOT NULL,
    default_lease_seconds integer DEFAULT 60 NOT NULL,
    max_lease_seconds integer DEFAULT 43200 NOT NULL,
    max_payload_bytes integer DEFAULT 262144 NOT NULL,
    max_json_depth integer DEFAULT 32 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_dependency_depth integer DEFAULT 100 NOT NULL,
    max_batch_jobs integer DEFAULT 1000 NOT NULL,
    max_batch_dependencies integer DEFAULT 10000 NOT NULL,
    CONSTRAINT enqueue_limits_default_lease_seconds_check CHECK ((default_lease_seconds >= 1)),
    CONSTRAINT enqueue_limits_default_max_attempts_check CHECK ((default_max_attempts >= 1)),
    CONSTRAINT enqueue_limits_max_batch_dependencies_check CHECK ((max_batch_dependencies >= 1)),
    CONSTRAINT enqueue_limits_max_batch_jobs_check CHECK ((max_batch_jobs >= 1)),
    CONSTRAINT enqueue_limits_max_dependency_depth_check CHECK ((max_dependency_depth >= 1)),
    CONSTRAINT enqueue_limits_max_lease_seconds_check CHECK ((max_lease_seconds >= default_lease_seconds)),
    CONSTRAINT enqueue_limits_one_check CHECK (one)
);

--
-- Name: check_job(jobq.enqueue_limits, text, text, jsonb, integer, timestamp with time zone, double precision, integer, integer, text, jsonb, text, text, integer); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_job(limits jobq.enqueue_limits, queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, on_parent_failure text, concurrency_key text, parents integer) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $_$
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
$_$;

--
-- Name: check_lifecycle(integer, timestamp with time zone, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_lifecycle(timeout_seconds integer, start_by timestamp with time zone, at text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF timeout_seconds IS NOT NULL AND timeout_seconds NOT BETWEEN 1 AND 604800 THEN
        RAISE EXCEPTION 'timeout_seconds must be between 1 and 604800'
            USING ERRCODE = 'JQ422', DETAIL = at || 'timeout_seconds';
    END IF;
    IF start_by IS NOT NULL AND start_by NOT BETWEEN '1970-01-01T00:00:00Z'::timestamptz
                                              AND '9999-12-30T23:59:59.999999Z'::timestamptz THEN
        RAISE EXCEPTION 'start_by must be a time from 1970-01-01T00:00:00Z to 9999-12-30T23:59:59.999999Z'
            USING ERRCODE = 'JQ422', DETAIL = at || 'start_by';
    END IF;
END
$$;

--
-- Name: check_new_dependencies(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_new_dependencies() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    ended_ids bigint[];
    ended_states text[];
BEGIN
    IF NEW.parent_id IS DISTINCT FROM (SELECT min(d.parent_id) FROM jobq.job_dependencies d
                                         WHERE d.child_id = NEW.child_id) THEN
        RETURN NULL;  -- another of its edges does it (or the child is gone)
    END IF;
    PERFORM FROM jobq.jobs p
     WHERE p.id IN (SELECT d.parent_id FROM jobq.job_dependencies d
                     WHERE d.child_id = NEW.child_id AND NOT d.resolved)
     ORDER BY p.id
       FOR NO KEY UPDATE;
    UPDATE jobq.jobs p
       SET has_dependents = true
     WHERE p.id IN (SELECT d.parent_id FROM jobq.job_dependencies d
                     WHERE d.child_id = NEW.child_id AND NOT d.resolved)
       AND NOT p.has_dependents;
    SELECT array_agg(d.parent_id ORDER BY d.parent_id),
           array_agg(coalesce(p.state::text, 'deleted') ORDER BY d.parent_id)
      INTO ended_ids, ended_states
      FROM jobq.job_dependencies d
      LEFT JOIN jobq.jobs p ON p.id = d.parent_id
     WHERE d.child_id = NEW.child_id AND NOT d.resolved
       AND (p.id IS NULL OR p.state IN ('succeeded', 'failed', 'cancelled'));
    IF ended_ids IS NOT NULL THEN
        PERFORM jobq.settle_dependents(ended_ids, ended_states, NEW.child_id);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: check_trace(text, text, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_trace(traceparent text, tracestate text, at text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
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
$_$;

--
-- Name: check_trace_of(jsonb, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_trace_of(trace jsonb, at text) RETURNS void
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

--
-- Name: check_unique(jsonb, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.check_unique(options jsonb, field text DEFAULT 'unique'::text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    all_states CONSTANT text[] := ARRAY['waiting', 'queued', 'running', 'succeeded', 'failed',
                                        'cancelled'];
BEGIN
    IF options IS NULL OR options = 'null' THEN
        RETURN;
    END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION '% must be a JSON object', field
            USING ERRCODE = 'JQ422', DETAIL = field;
    END IF;
    IF EXISTS (SELECT FROM jsonb_object_keys(options) AS k
                WHERE k NOT IN ('key', 'period', 'states', 'on_conflict')) THEN
        RAISE EXCEPTION '% takes key, period, states and on_conflict', field
            USING ERRCODE = 'JQ422', DETAIL = field;
    END IF;
    IF jsonb_typeof(options->'key') IS DISTINCT FROM 'string'
       OR length(options->>'key') NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION '%.key must be 1 to 255 characters', field
            USING ERRCODE = 'JQ422', DETAIL = field || '.key';
    END IF;
    IF jsonb_typeof(options->'period') NOT IN ('number', 'null')
       OR (options->>'period')::numeric NOT BETWEEN 1 AND 31622400
       OR (options->>'period')::numeric <> floor((options->>'period')::numeric) THEN
        RAISE EXCEPTION '%.period must be a whole number of seconds from 1 to 31622400', field
            USING ERRCODE = 'JQ422', DETAIL = field || '.period';
    END IF;
    IF jsonb_typeof(options->'states') NOT IN ('array', 'null')
       OR (jsonb_typeof(options->'states') = 'array'
           AND (EXISTS (SELECT FROM jsonb_array_elements(options->'states') AS s
                         WHERE jsonb_typeof(s) <> 'string' OR s #>> '{}' <> ALL(all_states))
                OR NOT options->'states' @> '["waiting", "queued", "running"]')) THEN
        RAISE EXCEPTION '%.states must be job states, among them waiting, queued and running',
            field
            USING ERRCODE = 'JQ422', DETAIL = field || '.states';
    END IF;
    IF jsonb_typeof(options->'on_conflict') NOT IN ('string', 'null')
       OR options->>'on_conflict' NOT IN ('return_existing', 'replace') THEN
        RAISE EXCEPTION '%.on_conflict must be return_existing or replace', field
            USING ERRCODE = 'JQ422', DETAIL = field || '.on_conflict';
    END IF;
END
$$;

--
-- Name: count_job_changes(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.count_job_changes() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- one row per statistic the statement moved (its net change), none when it moved
    -- nothing counted (a heartbeat, progress)
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
        SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
          FROM new_jobs j
         CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                              j.attempted_at, j.finished_at, 1, true) s
         GROUP BY 1, 2, 3, 4, 5;
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT j.queue, j.type, j.last_error->>'type', count(*)
          FROM new_jobs j
         WHERE j.state = 'failed'
         GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'UPDATE' THEN
        -- jobq.job_stats_of's rules, with the old and new rows first grouped by what
        -- they count in (a lease or a complete of many jobs makes a few groups) and the
        -- groups whose rows cancel out (a heartbeat's) dropped before each is spread
        -- into its statistics
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
        SELECT g.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
          FROM (SELECT j.queue, j.state,
                       date_trunc('minute', j.created_at) AS enqueued,
                       date_trunc('minute', j.started_at) AS started,
                       CASE WHEN j.started_at IS NOT NULL THEN jobq.duration_bucket(
                           extract(epoch FROM j.started_at - j.created_at)::double precision)
                       END AS wait,
                       CASE WHEN j.state IN ('succeeded', 'failed')
                            THEN date_trunc('minute', j.finished_at) END AS ended,
                       CASE WHEN j.state IN ('succeeded', 'failed')
                                 AND j.finished_at IS NOT NULL AND j.attempted_at IS NOT NULL
                            THEN jobq.duration_bucket(extract(
                                epoch FROM j.finished_at - j.attempted_at)::double precision)
                       END AS run,
                       sum(j.sign) AS jobs
                  FROM (SELECT n.queue, n.state, n.created_at, n.started_at, n.attempted_at,
                               n.finished_at, 1 AS sign
                          FROM new_jobs n
                        UNION ALL
                        SELECT o.queue, o.state, o.created_at, o.started_at, o.attempted_at,
                               o.finished_at, -1
                          FROM old_jobs o) AS j
                 GROUP BY 1, 2, 3, 4, 5, 6, 7
                HAVING sum(j.sign) <> 0) AS g
         CROSS JOIN LATERAL (VALUES
            ('jobs', g.state, NULL::timestamptz, NULL::smallint, g.jobs),
            ('enqueued', NULL, g.enqueued, NULL, g.jobs),
            ('wait', NULL, g.started, g.wait, CASE WHEN g.started IS NOT NULL THEN g.jobs END),
            (CAST(g.state AS text), NULL, g.ended, NULL,
             CASE WHEN g.ended IS NOT NULL THEN g.jobs END),
            ('run', NULL, g.ended, g.run, CASE WHEN g.run IS NOT NULL THEN g.jobs END)
          ) AS s(kind, state, minute, bucket, n)
         WHERE s.n IS NOT NULL
         GROUP BY 1, 2, 3, 4, 5
        HAVING sum(s.n) <> 0;
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT f.queue, f.type, f.error_type, sum(f.sign)
          FROM (SELECT n.queue, n.type, n.last_error->>'type' AS error_type, 1 AS sign
                  FROM new_jobs n WHERE n.state = 'failed'
                UNION ALL
                SELECT o.queue, o.type, o.last_error->>'type', -1
                  FROM old_jobs o WHERE o.state = 'failed') AS f
         GROUP BY 1, 2, 3
        HAVING sum(f.sign) <> 0;
    ELSE
        INSERT INTO jobq.job_stat_deltas (queue, kind, state, n)
        SELECT j.queue, 'jobs', j.state, -count(*) FROM old_jobs j GROUP BY 1, 3;
        INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
        SELECT j.queue, j.type, j.last_error->>'type', -count(*)
          FROM old_jobs j
         WHERE j.state = 'failed'
         GROUP BY 1, 2, 3;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION count_job_changes(); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.count_job_changes() IS 'After each statement on jobq.jobs: what it changed in the statistics, as deltas.';

--
-- Name: duration_bucket(double precision); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.duration_bucket(seconds double precision) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- 0: under a millisecond; k: [2^((k-1)/2), 2^(k/2)) ms; 60 holds everything longer
    SELECT CAST(CASE WHEN seconds < 0.001 THEN 0
                     ELSE least(60, 1 + floor(2 * ln(seconds * 1000) / ln(2))) END
                AS smallint)
$$;

--
-- Name: FUNCTION duration_bucket(seconds double precision); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.duration_bucket(seconds double precision) IS 'The histogram bucket of a duration: half powers of two from a millisecond.';

--
-- Name: enqueue(text, text, jsonb, integer, timestamp with time zone, double precision, integer, integer, text, jsonb, bigint[], text, text, text[], text[], text, text, integer, text[], text, integer, timestamp with time zone, text, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.enqueue(queue text, type text, payload jsonb DEFAULT NULL::jsonb, priority integer DEFAULT 0, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, delay_seconds double precision DEFAULT NULL::double precision, max_attempts integer DEFAULT NULL::integer, lease_seconds integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, metadata jsonb DEFAULT '{}'::jsonb, depends_on bigint[] DEFAULT NULL::bigint[], on_parent_failure text DEFAULT 'cancel'::text, concurrency_key text DEFAULT NULL::text, parent_queues text[] DEFAULT NULL::text[], parent_queue_patterns text[] DEFAULT NULL::text[], fairness_key text DEFAULT NULL::text, unique_key text DEFAULT NULL::text, unique_period integer DEFAULT NULL::integer, unique_states text[] DEFAULT NULL::text[], unique_on_conflict text DEFAULT NULL::text, timeout_seconds integer DEFAULT NULL::integer, start_by timestamp with time zone DEFAULT NULL::timestamp with time zone, traceparent text DEFAULT NULL::text, tracestate text DEFAULT NULL::text) RETURNS TABLE(id bigint, state jobq.job_state, deduplicated boolean, replaced boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: enqueue_limits_for(text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.enqueue_limits_for(queue text) RETURNS jobq.enqueue_limits
    LANGUAGE sql STABLE
    AS $$
    SELECT l.one,
           coalesce(q.max_attempts, l.default_max_attempts),
           coalesce(q.lease_seconds, l.default_lease_seconds),
           l.max_lease_seconds, l.max_payload_bytes, l.max_json_depth, l.updated_at,
           l.max_dependency_depth, l.max_batch_jobs, l.max_batch_dependencies
      FROM jobq.enqueue_limits l
      LEFT JOIN jobq.queues q ON q.name = enqueue_limits_for.queue
$$;

--
-- Name: enqueue_many(text, jsonb, text[], text[]); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.enqueue_many(queue text, jobs jsonb, parent_queues text[] DEFAULT NULL::text[], parent_queue_patterns text[] DEFAULT NULL::text[]) RETURNS TABLE(ord integer, id bigint, state jobq.job_state, deduplicated boolean, replaced boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: fair_key_queued(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.fair_key_queued() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext(NEW.queue), hashtext(NEW.fairness_key));
    IF NOT EXISTS (SELECT FROM jobq.fair_keys k
                    WHERE k.queue = NEW.queue AND k.key = NEW.fairness_key) THEN
        INSERT INTO jobq.fair_keys (queue, key, pass)
        SELECT NEW.queue, NEW.fairness_key,
               coalesce((SELECT min(k.pass) FROM jobq.fair_keys k WHERE k.queue = NEW.queue), 0)
          FROM jobq.queues q
         WHERE q.name = NEW.queue AND q.ordering = 'fair'
            ON CONFLICT (queue, key) DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: forget_fair_key(text, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.forget_fair_key(queue text, key text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext(forget_fair_key.queue),
                                     hashtext(forget_fair_key.key)) THEN
        RETURN false;
    END IF;
    DELETE FROM jobq.fair_keys k
     WHERE k.queue = forget_fair_key.queue AND k.key = forget_fair_key.key
       AND (SELECT true FROM jobq.jobs j
                     WHERE j.queue = k.queue AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                       AND j.state = 'queued'
                     ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                     LIMIT 1) IS NULL;
    RETURN FOUND;
END
$$;

--
-- Name: forget_job_counts(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.forget_job_counts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas WHERE kind = 'jobs';
    DELETE FROM jobq.failed_group_counts;
    DELETE FROM jobq.failed_group_deltas;
    RETURN NULL;
END
$$;

--
-- Name: FUNCTION forget_job_counts(); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.forget_job_counts() IS 'After jobq.jobs is truncated: no job is counted (the minutes keep their history).';

--
-- Name: histogram_percentiles(smallint[], double precision[]); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.histogram_percentiles(buckets smallint[], jobs double precision[]) RETURNS double precision[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
            -- the nearest-rank p50 and p95 of a histogram (each bucket once, with its
            -- jobs), as their buckets' durations; NULL for an empty one
            SELECT CASE WHEN count(*) > 0 THEN ARRAY[
                       jobq.bucket_seconds(min(h.bucket) FILTER (WHERE h.up_to >= 0.5 * h.total)),
                       jobq.bucket_seconds(min(h.bucket) FILTER (WHERE h.up_to >= 0.95 * h.total))]
                   END
              FROM (SELECT b.bucket, sum(b.jobs) OVER (ORDER BY b.bucket) AS up_to,
                           sum(b.jobs) OVER () AS total
                      FROM unnest(buckets, jobs) AS b(bucket, jobs)
                     WHERE b.jobs > 0) AS h
        $$;

--
-- Name: FUNCTION histogram_percentiles(buckets smallint[], jobs double precision[]); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.histogram_percentiles(buckets smallint[], jobs double precision[]) IS 'The nearest-rank p50 and p95 of a histogram of duration buckets.';

--
-- Name: insert_jobs(text, text[], jsonb[], integer[], timestamp with time zone[], double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer, integer[], boolean[], jsonb[], text[], jsonb[], integer[], timestamp with time zone[], text[], text[]); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.insert_jobs(queue text, types text[], payloads jsonb[], priorities integer[], run_ats timestamp with time zone[], delays double precision[], max_attempts integer[], lease_seconds integer[], idempotency_keys text[], metadatas jsonb[], concurrency_keys text[], default_max_attempts integer, default_lease_seconds integer, waiting_fors integer[] DEFAULT NULL::integer[], runs_on_parent_failure boolean[] DEFAULT NULL::boolean[], parent_failures jsonb[] DEFAULT NULL::jsonb[], fairness_keys text[] DEFAULT NULL::text[], uniques jsonb[] DEFAULT NULL::jsonb[], timeouts integer[] DEFAULT NULL::integer[], start_bys timestamp with time zone[] DEFAULT NULL::timestamp with time zone[], traceparents text[] DEFAULT NULL::text[], tracestates text[] DEFAULT NULL::text[]) RETURNS TABLE(ord integer, id bigint, state jobq.job_state, deduplicated boolean, job jobq.jobs, refused_max_backlog integer, refused_backlog bigint, refused_new_jobs bigint, replaced boolean)
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

--
-- Name: job_stats_of(text, jobq.job_state, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, integer, boolean); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.job_stats_of(queue text, state jobq.job_state, created_at timestamp with time zone, started_at timestamp with time zone, attempted_at timestamp with time zone, finished_at timestamp with time zone, sign integer, history boolean) RETURNS TABLE(queue text, kind text, state jobq.job_state, minute timestamp with time zone, bucket smallint, n bigint)
    LANGUAGE sql STABLE
    AS $$
    -- what one job adds to the statistics (sign -1: takes away); `history` false (a
    -- deletion): its count only, the minutes it made keep it
    SELECT job_stats_of.queue, s.kind, s.state, s.minute, s.bucket, CAST(s.n AS bigint)
      FROM (VALUES
        ('jobs', job_stats_of.state, NULL::timestamptz, NULL::smallint, sign),
        ('enqueued', NULL, date_trunc('minute', created_at), NULL,
         CASE WHEN history THEN sign END),
        ('wait', NULL, date_trunc('minute', started_at),
         jobq.duration_bucket(extract(epoch FROM started_at - created_at)::double precision),
         CASE WHEN history AND started_at IS NOT NULL THEN sign END),
        (CAST(job_stats_of.state AS text), NULL, date_trunc('minute', finished_at), NULL,
         CASE WHEN history AND job_stats_of.state IN ('succeeded', 'failed')
                   AND finished_at IS NOT NULL THEN sign END),
        ('run', NULL, date_trunc('minute', finished_at),
         jobq.duration_bucket(extract(epoch FROM finished_at - attempted_at)::double precision),
         CASE WHEN history AND job_stats_of.state IN ('succeeded', 'failed')
                   AND finished_at IS NOT NULL AND attempted_at IS NOT NULL THEN sign END)
      ) AS s(kind, state, minute, bucket, n)
     WHERE s.n IS NOT NULL
$$;

--
-- Name: FUNCTION job_stats_of(queue text, state jobq.job_state, created_at timestamp with time zone, started_at timestamp with time zone, attempted_at timestamp with time zone, finished_at timestamp with time zone, sign integer, history boolean); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.job_stats_of(queue text, state jobq.job_state, created_at timestamp with time zone, started_at timestamp with time zone, attempted_at timestamp with time zone, finished_at timestamp with time zone, sign integer, history boolean) IS 'What one job adds to the statistics: its count by state, its enqueue, first lease (wait time) and end (outcome, run time), each in its minute.';

--
-- Name: json_depth(jsonb, integer); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.json_depth(doc jsonb, stop_after integer) RETURNS integer
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

--
-- Name: lease_fair(text, text[], integer, integer, text, bigint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.lease_fair(queue text, types text[], max_jobs integer, lease_seconds integer, worker_id text, key_id bigint) RETURNS SETOF jobq.jobs
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    unlimited boolean;
    locked_at timestamptz;
BEGIN
    -- the leases of one fair queue take turns on its row; none of a paused queue, nor
    -- of one that is no longer fair (the caller's list of fair queues was stale)
    SELECT q.max_running IS NULL AND q.rate_limit_jobs IS NULL
           AND q.rate_limit_per_key_jobs IS NULL
      INTO unlimited
      FROM jobq.queues q
     WHERE q.name = lease_fair.queue AND q.limited AND q.ordering = 'fair'
       AND NOT q.paused
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF unlimited THEN
        -- as the plain lease: commit without waiting for the WAL flush (a lease lost
        -- to a crash leaves its jobs queued, and its worker's finish is refused); not
        -- under a limit, which a lost lease's jobs, run meanwhile, would go past
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    -- the claim's snapshot is taken after the lock: it sees every lease before it
    locked_at := clock_timestamp();
    RETURN QUERY
    WITH RECURSIVE settings AS MATERIALIZED (
        SELECT q.max_running, q.rate_limit_jobs, q.rate_limit_seconds, q.fair_weights,
               q.rate_limit_per_key_jobs AS key_jobs, q.rate_limit_per_key_seconds AS key_seconds,
               q.aging_seconds, q.aging_max
          FROM jobq.queues q
         WHERE q.name = lease_fair.queue AND q.ordering = 'fair'
    ),
    room AS MATERIALIZED (
        SELECT greatest(0, least(
                   CAST(lease_fair.max_jobs AS integer),
                   s.max_running - CASE WHEN s.max_running IS NOT NULL THEN (
                       SELECT count(*) FROM jobq.jobs j
                        WHERE j.state = 'running' AND j.queue = lease_fair.queue) END,
                   s.rate_limit_jobs - (
                       SELECT coalesce(sum(r.jobs), 0)
                         FROM jobq.queue_rate_log r
                        WHERE r.queue = lease_fair.queue
                          AND r.at > locked_at
                                     - make_interval(secs => s.rate_limit_seconds)))) AS n
          FROM settings s
    ),
    walk(key, pass, weight, room, due, idle, found) AS (
        -- before the first key: no key has a pass of -Infinity
        SELECT '', CAST('-Infinity' AS double precision), CAST(1 AS double precision),
               CAST(0 AS bigint), false, false, 0
         WHERE (SELECT n FROM room) > 0
        UNION ALL
        SELECT nxt.key, nxt.pass, nxt.weight, p.room, p.room > 0 AND p.due,
               NOT p.due AND (
                   SELECT true FROM jobq.jobs j
                    WHERE j.queue = lease_fair.queue
                      AND j.fairness_key >= nxt.key AND j.fairness_key <= nxt.key
                      AND j.state = 'queued'
                    ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                    LIMIT 1) IS NULL,
               w.found + CAST(p.room > 0 AND p.due AS integer)
          FROM walk w
         CROSS JOIN LATERAL (
                SELECT k.key, k.pass,
                       coalesce(CAST(s.fair_weights ->> k.key AS double precision), 1) AS weight
                  FROM jobq.fair_keys k CROSS JOIN settings s
                 WHERE k.queue = lease_fair.queue AND (k.pass, k.key) > (w.pass, w.key)
                 ORDER BY k.pass, k.key
                 LIMIT 1
               ) AS nxt
         CROSS JOIN LATERAL (
                SELECT CASE WHEN s.key_jobs IS NULL THEN (SELECT n FROM room)
                            ELSE s.key_jobs - (
                                SELECT coalesce(sum(r.jobs), 0)
                                  FROM jobq.fair_key_rate_log r
                                 WHERE r.queue = lease_fair.queue AND r.key = nxt.key
                                   AND r.at > locked_at
                                              - make_interval(secs => s.key_seconds)) END
                           AS room,
                       coalesce((
                           SELECT true FROM jobq.jobs j
                            WHERE j.queue = lease_fair.queue
                              AND j.fairness_key >= nxt.key AND j.fairness_key <= nxt.key
                              AND j.state = 'queued' AND j.run_at <= locked_at
                              AND (j.start_by IS NULL OR j.start_by > locked_at)
                              AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                   OR j.type = ANY(CAST(lease_fair.types AS text[])))
                            ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                            LIMIT 1), false) AS due
                  FROM settings s
                OFFSET 0  -- each probe once (not once for each place that names it)
               ) AS p
         WHERE w.found < (SELECT n FROM room)
    ),
    keys AS MATERIALIZED (
        SELECT w.key, w.pass, w.weight, w.room FROM walk w WHERE w.due
    ),
    horizon AS MATERIALIZED (
        -- no job whose turn comes after this one is picked: when the walk found enough
        -- keys with due jobs, the pass of the last (each key's first job is earlier);
        -- with fewer, without aging, the turn by which their jobs have max_jobs turns in
        -- all (each key has at least (turn - pass) * weight of them), unless one runs
        -- out of jobs before (then a second look, below); with aging, none
        SELECT CASE WHEN count(*) >= (SELECT n FROM room) THEN max(pass)
                    WHEN (SELECT aging_seconds FROM settings) IS NULL
                    THEN max(pass) + (SELECT n FROM room) / sum(weight)
                    ELSE CAST('Infinity' AS double precision) END AS pass
          FROM keys
    ),
    shares AS MATERIALIZED (
        -- each key's best due jobs, as many as it has turns up to the horizon
        SELECT c.id, k.key, k.pass + (c.nth - 1) / k.weight AS turn, wanted.n AS share,
               least(k.room, (SELECT n FROM room)) AS most
          FROM keys k
         CROSS JOIN settings s
         CROSS JOIN LATERAL (
                SELECT CAST(least(CAST(k.room AS double precision), (SELECT n FROM room),
                                  1 + floor(((SELECT pass FROM horizon) - k.pass) * k.weight))
                            AS integer) AS n
               ) AS wanted
         CROSS JOIN LATERAL (
                -- without aging: the key's best due jobs along jobs_fair_claim_idx, in order
                SELECT x.id, row_number() OVER () AS nth
                  FROM (SELECT j.id
                           FROM jobq.jobs j
                          WHERE s.aging_seconds IS NULL
                            AND j.queue = lease_fair.queue
                            AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                            AND j.state = 'queued' AND j.run_at <= locked_at
                            AND (j.start_by IS NULL OR j.start_by > locked_at)
                            AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                 OR j.type = ANY(CAST(lease_fair.types AS text[])))
                          ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                          LIMIT wanted.n) AS x
                UNION ALL
                -- with aging: the longest-waiting due jobs of each priority in use, best first
                SELECT x.id, row_number() OVER (ORDER BY x.effective DESC, x.run_at, x.id) AS nth
                  FROM (WITH RECURSIVE levels(priority) AS (
                             (SELECT j.priority FROM jobq.jobs j
                               WHERE s.aging_seconds IS NOT NULL
                                 AND j.queue = lease_fair.queue
                                 AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                 AND j.state = 'queued'
                               ORDER BY j.fairness_key, j.priority DESC LIMIT 1)
                             UNION ALL
                             SELECT (SELECT j.priority FROM jobq.jobs j
                                      WHERE j.queue = lease_fair.queue
                                        AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                        AND j.state = 'queued' AND j.priority < l.priority
                                      ORDER BY j.fairness_key, j.priority DESC LIMIT 1)
                               FROM levels l
                              WHERE l.priority IS NOT NULL
                         )
                         SELECT o.id, o.effective, o.run_at
                           FROM levels l
                          CROSS JOIN LATERAL (
                                 SELECT j.id, j.run_at,
                                        j.priority + least(s.aging_max, floor(
                                            extract(epoch FROM now() - j.run_at)
                                            / s.aging_seconds)) AS effective
                                   FROM jobq.jobs j
                                  WHERE j.queue = lease_fair.queue
                                    AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                                    AND j.state = 'queued' AND j.priority = l.priority
                                    AND j.run_at <= locked_at
                                    AND (j.start_by IS NULL OR j.start_by > locked_at)
                                    AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                         OR j.type = ANY(CAST(lease_fair.types AS text[])))
                                  ORDER BY j.fairness_key, j.run_at, j.id
                                  LIMIT wanted.n
                                ) AS o
                          WHERE l.priority IS NOT NULL
                          ORDER BY o.effective DESC, o.run_at, o.id
                          LIMIT wanted.n) AS x
               ) AS c
    ),
    again AS MATERIALIZED (
        -- the shares fell short of the lease, and a key that gave its whole share may
        -- have more: look again, without the horizon
        SELECT count(*) < (SELECT n FROM room) AND EXISTS (
                   SELECT FROM shares s
                    GROUP BY s.key, s.share, s.most
                   HAVING count(*) = s.share AND s.share < s.most) AS needed
          FROM shares
    ),
    candidates AS (
        SELECT s.id, s.key, s.turn FROM shares s WHERE NOT (SELECT needed FROM again)
        UNION ALL
        -- the second look (aging has no horizon: never)
        SELECT c.id, k.key, k.pass + (c.nth - 1) / k.weight AS turn
          FROM keys k
         CROSS JOIN LATERAL (
                SELECT x.id, row_number() OVER () AS nth
                  FROM (SELECT j.id
                           FROM jobq.jobs j
                          WHERE j.queue = lease_fair.queue
                            AND j.fairness_key >= k.key AND j.fairness_key <= k.key
                            AND j.state = 'queued' AND j.run_at <= locked_at
                            AND (j.start_by IS NULL OR j.start_by > locked_at)
                            AND (cardinality(CAST(lease_fair.types AS text[])) = 0
                                 OR j.type = ANY(CAST(lease_fair.types AS text[])))
                          ORDER BY j.fairness_key, j.priority DESC, j.run_at, j.id
                          LIMIT least(k.room, (SELECT n FROM room))) AS x
               ) AS c
         WHERE (SELECT needed FROM again)
    ),
    picked AS (
        SELECT id, key FROM candidates ORDER BY turn, key LIMIT (SELECT n FROM room)
    ),
    leased AS (
        UPDATE jobq.jobs j
           -- lease.sql's claim fragment, its time taken after the lock
           SET state = 'running',
               attempt = j.attempt + 1,
               lease_id = gen_random_uuid(),
               current_lease_seconds = least(coalesce(lease_fair.lease_seconds, j.lease_seconds),
                                             j.timeout_seconds),
               lease_expires_at = locked_at + make_interval(
                   secs => least(coalesce(lease_fair.lease_seconds, j.lease_seconds),
                                 j.timeout_seconds)),
               worker_id = lease_fair.worker_id,
               lease_key_id = lease_fair.key_id,
               attempted_at = locked_at,
               started_at = coalesce(j.started_at, locked_at),
               updated_at = locked_at
         WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND j.state::text = 'queued'
        RETURNING j.*
    ),
    moves AS MATERIALIZED (
        -- each key leased from takes its turns; each key passed over goes behind the walk
        SELECT w.key,
               CASE WHEN p.jobs IS NOT NULL THEN w.pass + p.jobs / w.weight
                    ELSE greatest(w.pass + 1 / w.weight, (SELECT max(pass) FROM walk)) END AS pass
          FROM walk w
          LEFT JOIN (SELECT key, count(*) AS jobs FROM picked GROUP BY key) AS p ON p.key = w.key
         WHERE NOT w.idle AND w.pass > CAST('-Infinity' AS double precision)
           AND (p.jobs IS NOT NULL OR NOT w.due)
    ),
    turns AS (
        -- by primary key, the keys moved only (a join let a plan walk every key of the queue)
        UPDATE jobq.fair_keys f
           SET pass = (SELECT m.pass FROM moves m WHERE m.key = f.key)
         WHERE f.queue = lease_fair.queue AND f.key = ANY(ARRAY(SELECT key FROM moves))
        RETURNING 1
    ),
    forgotten AS (
        SELECT jobq.forget_fair_key(lease_fair.queue, w.key) FROM walk w WHERE w.idle
    ),
    logged AS (
        INSERT INTO jobq.queue_rate_log (queue, at, jobs)
        SELECT lease_fair.queue, locked_at, count(*)
          FROM leased
        HAVING count(*) > 0 AND (SELECT rate_limit_jobs FROM settings) IS NOT NULL
        RETURNING 1
    ),
    key_logged AS (
        INSERT INTO jobq.fair_key_rate_log (queue, key, at, jobs)
        SELECT lease_fair.queue, l.fairness_key, locked_at, count(*)
          FROM leased l
         WHERE (SELECT key_jobs FROM settings) IS NOT NULL
         GROUP BY l.fairness_key
        RETURNING 1
    ),
    forgotten_leases AS (
        DELETE FROM jobq.queue_rate_log r
         USING settings s
         WHERE r.queue = lease_fair.queue AND s.rate_limit_jobs IS NOT NULL
           AND r.at <= locked_at - make_interval(secs => s.rate_limit_seconds)
        RETURNING 1
    ),
    forgotten_key_leases AS (
        DELETE FROM jobq.fair_key_rate_log r
         USING settings s
         WHERE r.queue = lease_fair.queue AND s.key_jobs IS NOT NULL
           AND r.at <= locked_at - make_interval(secs => s.key_seconds)
        RETURNING 1
    )
    SELECT leased.*
      FROM leased
     -- a condition on no row: evaluated first, whether or not a job was leased
     WHERE (SELECT count(*) FROM forgotten) >= 0;
END
$$;

--
-- Name: FUNCTION lease_fair(queue text, types text[], max_jobs integer, lease_seconds integer, worker_id text, key_id bigint); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.lease_fair(queue text, types text[], max_jobs integer, lease_seconds integer, worker_id text, key_id bigint) IS 'Lease up to max_jobs due jobs of one fair queue, taking turns across its keys.';

--
-- Name: minute_entries(bigint, bigint, bigint, jsonb, jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.minute_entries(enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb) RETURNS TABLE(kind text, bucket smallint, jobs bigint)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- a per-minute rollup as jobq.queue_recent's entries: its counts as bucket 0, then
    -- each histogram bucket
    SELECT c.kind, CAST(0 AS smallint), c.jobs
      FROM (VALUES ('enqueued', enqueued), ('succeeded', succeeded), ('failed', failed))
           AS c(kind, jobs)
     WHERE c.jobs <> 0
    UNION ALL
    SELECT 'wait', CAST(key AS smallint), CAST(value AS bigint)
      FROM jsonb_each_text(wait_buckets)
    UNION ALL
    SELECT 'run', CAST(key AS smallint), CAST(value AS bigint)
      FROM jsonb_each_text(run_buckets)
$$;

--
-- Name: FUNCTION minute_entries(enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.minute_entries(enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb) IS 'A per-minute rollup as jobq.queue_recent''s entries (counts in bucket 0).';

--
-- Name: new_job_keys(text, text[], text[], jsonb[]); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.new_job_keys(queue text, types text[], keys text[], uniques jsonb[]) RETURNS text[]
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF coalesce(num_nonnulls(VARIADIC uniques), 0) = 0 THEN
        RETURN keys;
    END IF;
    RETURN ARRAY(
        SELECT n.key
          FROM (SELECT i.key, i.options, i.type, i.ord,
                       row_number() OVER (PARTITION BY i.type, i.options->>'key',
                                                       jobq.unique_since(i.options),
                                                       CASE WHEN i.options IS NULL THEN i.ord END
                                          ORDER BY i.ord) AS nth
                  FROM unnest(types, keys, uniques) WITH ORDINALITY AS i(type, key, options, ord)
               ) AS n
         WHERE n.options IS NULL
            OR (n.nth = 1
                AND NOT EXISTS (SELECT FROM jobq.unique_holder(new_job_keys.queue, n.type,
                                                               n.options->>'key',
                                                               jobq.unique_since(n.options))))
         ORDER BY n.ord);
END
$$;

--
-- Name: parent_failed(bigint, text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.parent_failed(parent bigint, parent_state text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT jsonb_build_object(
        'type', 'parent_failed',
        'message', format('parent job %s %s', parent,
                          CASE WHEN parent_state = 'deleted' THEN 'was deleted'
                               ELSE 'ended ' || parent_state END),
        'details', jsonb_build_object('parent_id', parent, 'parent_state', parent_state))
$$;

--
-- Name: queue_backlog(text, integer); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_backlog(queue_name text, up_to integer) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
        BEGIN
            -- The claim index holds the queued jobs, the lease-expiry index the running
            -- ones: each count reads at most `up_to` index entries.
            RETURN (SELECT count(*) FROM (SELECT FROM jobq.jobs
                                           WHERE queue = queue_name AND state = 'queued'
                                           LIMIT up_to) AS queued)
                 + (SELECT count(*) FROM (SELECT FROM jobq.jobs
                                           WHERE queue = queue_name AND state = 'running'
                                           LIMIT up_to) AS running);
        END
        $$;

--
-- Name: queue_job_counts(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_job_counts() RETURNS TABLE(queue text, waiting bigint, queued bigint, running bigint, succeeded bigint, failed bigint, cancelled bigint)
    LANGUAGE sql STABLE
    AS $$
SELECT c.queue,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'waiting'), 0) AS bigint) AS waiting,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'queued'), 0) AS bigint) AS queued,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'running'), 0) AS bigint) AS running,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'succeeded'), 0) AS bigint) AS succeeded,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'failed'), 0) AS bigint) AS failed,
       CAST(coalesce(sum(jobs) FILTER (WHERE state = 'cancelled'), 0) AS bigint) AS cancelled
  FROM (SELECT queue, state, jobs FROM jobq.job_counts
        UNION ALL
        SELECT queue, state, n FROM jobq.job_stat_deltas WHERE kind = 'jobs') AS c
 GROUP BY c.queue
$$;

--
-- Name: FUNCTION queue_job_counts(); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.queue_job_counts() IS 'Each queue''s jobs by state, exact: the folded counts plus the deltas not folded yet.';

--
-- Name: queue_minute_stats(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_minute_stats() RETURNS TABLE(queue text, minute timestamp with time zone, enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb)
    LANGUAGE sql STABLE
    AS $$
SELECT m.queue, m.minute, m.enqueued, m.succeeded, m.failed, m.wait_buckets, m.run_buckets
  FROM jobq.queue_minutes m
UNION ALL
SELECT d.queue, d.minute,
       coalesce(sum(n) FILTER (WHERE kind = 'enqueued'), 0),
       coalesce(sum(n) FILTER (WHERE kind = 'succeeded'), 0),
       coalesce(sum(n) FILTER (WHERE kind = 'failed'), 0),
       coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'wait'), '{}'),
       coalesce(jsonb_object_agg(bucket, n) FILTER (WHERE kind = 'run'), '{}')
  FROM (SELECT queue, minute, kind, bucket, sum(n) AS n
          FROM jobq.job_stat_deltas
         WHERE kind <> 'jobs'
         GROUP BY queue, minute, kind, bucket) AS d
 GROUP BY d.queue, d.minute
$$;

--
-- Name: FUNCTION queue_minute_stats(); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.queue_minute_stats() IS 'The per-minute rollups and the deltas not folded yet (a minute may have a row of each: add them up).';

--
-- Name: queue_overview(text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_overview(one text) RETURNS TABLE(queue text, queued bigint, due bigint, running bigint, waiting bigint, failed bigint, cancelled bigint, oldest_due_age_seconds double precision, paused boolean, paused_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET jit TO 'off'
    AS $$
    -- counts from the counters; of the queued jobs, those not due yet and the oldest due
    -- one read along the claim index, a probe per priority in use
    WITH counts AS (
        SELECT * FROM jobq.queue_job_counts() c WHERE one IS NULL OR c.queue = one
    ),
    heads AS (
        SELECT c.queue, h.first_due, h.later
          FROM counts c
         CROSS JOIN LATERAL (
            WITH RECURSIVE p(priority) AS (
                SELECT (SELECT max(j.priority) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue)
                UNION ALL
                SELECT (SELECT max(j.priority) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority < p.priority)
                  FROM p
                 WHERE p.priority IS NOT NULL
            )
            SELECT min(f.first_run_at) FILTER (WHERE f.first_run_at <= now()) AS first_due,
                   coalesce(sum(f.later), 0) AS later
              FROM p
             CROSS JOIN LATERAL (
                SELECT (SELECT j.run_at FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority = p.priority
                         ORDER BY j.run_at LIMIT 1) AS first_run_at,
                       (SELECT count(*) FROM jobq.jobs j
                         WHERE j.state = 'queued' AND j.queue = c.queue
                           AND j.priority = p.priority AND j.run_at > now()) AS later
             ) AS f
             WHERE p.priority IS NOT NULL
         ) AS h
         WHERE c.queued > 0
    ),
    settings AS (
        SELECT s.name AS queue, s.paused, s.paused_at
          FROM jobq.queues s
         WHERE one IS NULL OR s.name = one
    )
    SELECT queue,
           coalesce(c.queued, 0),
           coalesce(c.queued - h.later, 0),
           coalesce(c.running, 0),
           coalesce(c.waiting, 0),
           coalesce(c.failed, 0),
           coalesce(c.cancelled, 0),
           CAST(extract(epoch FROM now() - h.first_due) AS double precision),
           coalesce(s.paused, false),
           s.paused_at
      FROM (SELECT * FROM counts
             WHERE queued <> 0 OR running <> 0 OR waiting <> 0 OR failed <> 0
                OR cancelled <> 0) AS c
      LEFT JOIN heads h USING (queue)
      FULL JOIN settings s USING (queue)
     ORDER BY queue
$$;

--
-- Name: FUNCTION queue_overview(one text); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.queue_overview(one text) IS 'Per queue (one, or NULL: all): jobs queued, due, running, waiting, failed, cancelled; the oldest due job''s age; paused.';

--
-- Name: queue_retry_at(text, integer, double precision, double precision, double precision, double precision); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_retry_at(queue text, attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision) RETURNS timestamp with time zone
    LANGUAGE sql
    AS $$
            -- parameters named in full: jobq.queues has a backoff_jitter column too
            SELECT jobq.retry_at(
                       queue_retry_at.attempt, queue_retry_at.retry_after,
                       coalesce(q.backoff_base_seconds, queue_retry_at.backoff_base),
                       coalesce(q.backoff_cap_seconds, queue_retry_at.backoff_cap),
                       coalesce(q.backoff_jitter, queue_retry_at.backoff_jitter))
              FROM (SELECT) AS one
              LEFT JOIN jobq.queues q ON q.name = queue_retry_at.queue
        $$;

--
-- Name: queue_settings_of(jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.queue_settings_of(queue jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
        SELECT queue - ARRAY['name', 'paused', 'paused_at', 'created_at', 'updated_at', 'limited']
    $$;

--
-- Name: record_jobs_changed(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.record_jobs_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO jobq.job_events (kind, queue, job_id, type, attempt)
    SELECT CASE n.state WHEN 'running' THEN 'started'
                        WHEN 'queued' THEN 'retrying'
                        ELSE n.state::text END::jobq.event_kind,
           n.queue, n.id, n.type, n.attempt
      FROM new_jobs n
      JOIN old_jobs o ON o.id = n.id
     WHERE n.state <> o.state
       AND n.state <> 'waiting'
       AND NOT (n.state = 'queued' AND o.state = 'waiting')
     ORDER BY n.id;
    RETURN NULL;
END
$$;

--
-- Name: record_jobs_enqueued(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.record_jobs_enqueued() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO jobq.job_events (kind, queue, job_id, type, attempt)
    SELECT 'enqueued', queue, id, type, attempt FROM new_jobs ORDER BY id;
    RETURN NULL;
END
$$;

--
-- Name: record_queues_changed(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.record_queues_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- a row made by pausing is paused; one made by a settings change is not
        INSERT INTO jobq.job_events (kind, queue)
        SELECT CASE WHEN n.paused THEN 'queue_paused'
                    ELSE 'queue_settings' END::jobq.event_kind, n.name
          FROM new_queues n
         ORDER BY n.name;
    ELSE
        INSERT INTO jobq.job_events (kind, queue)
        SELECT kind, n.name
          FROM new_queues n
          JOIN old_queues o ON o.name = n.name
         CROSS JOIN LATERAL (
               SELECT CASE WHEN n.paused THEN 'queue_paused'
                           ELSE 'queue_resumed' END::jobq.event_kind AS kind
                WHERE n.paused <> o.paused
               UNION ALL
               SELECT 'queue_settings'
                WHERE jobq.queue_settings_of(to_jsonb(n))
                      <> jobq.queue_settings_of(to_jsonb(o))) AS k
         ORDER BY n.name;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: recount_statistics(); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.recount_statistics() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- the statistics of the jobs stored, as deltas (reads count them at once; the
    -- maintenance leader folds them), for a table filled with the triggers off
    LOCK TABLE jobq.jobs IN SHARE MODE;
    DELETE FROM jobq.job_counts;
    DELETE FROM jobq.job_stat_deltas;
    DELETE FROM jobq.queue_minutes;
    DELETE FROM jobq.queue_recent;
    DELETE FROM jobq.failed_group_counts;
    DELETE FROM jobq.failed_group_deltas;
    INSERT INTO jobq.job_stat_deltas (queue, kind, state, minute, bucket, n)
    SELECT s.queue, s.kind, s.state, s.minute, s.bucket, sum(s.n)
      FROM jobq.jobs j
     CROSS JOIN LATERAL jobq.job_stats_of(j.queue, j.state, j.created_at, j.started_at,
                                          j.attempted_at, j.finished_at, 1, true) s
     GROUP BY 1, 2, 3, 4, 5;
    INSERT INTO jobq.failed_group_deltas (queue, type, error_type, n)
    SELECT j.queue, j.type, j.last_error->>'type', count(*)
      FROM jobq.jobs j
     WHERE j.state = 'failed'
     GROUP BY 1, 2, 3;
END
$$;

--
-- Name: FUNCTION recount_statistics(); Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON FUNCTION jobq.recount_statistics() IS 'Counts and rollups made again from the jobs stored (the history of pruned jobs is lost).';

--
-- Name: retry_at(integer, double precision, double precision, double precision, double precision); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.retry_at(attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision) RETURNS timestamp with time zone
    LANGUAGE sql
    AS $$
            SELECT now() + make_interval(secs => coalesce(retry_after,
                least(backoff_base * power(2, attempt - 1), backoff_cap)
                * (1 + backoff_jitter * (2 * random() - 1))))
        $$;

--
-- Name: revive_dependents(bigint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.revive_dependents(parent bigint) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    frontier bigint[] := ARRAY[parent];
    announcements integer;
BEGIN
    WHILE coalesce(cardinality(frontier), 0) > 0 LOOP
        WITH candidates AS MATERIALIZED (
            SELECT c.id, dead.parent_id AS dead_parent, dead.state AS dead_state,
                   c.waiting_for > (SELECT count(*) FROM jobq.job_dependencies u
                                     WHERE u.child_id = c.id AND NOT u.resolved) AS orphaned
              FROM jobq.job_dependencies d
              JOIN jobq.jobs c ON c.id = d.child_id
              LEFT JOIN LATERAL (
                   SELECT u.parent_id, p.state::text AS state
                     FROM jobq.job_dependencies u
                     JOIN jobq.jobs p ON p.id = u.parent_id
                    WHERE u.child_id = c.id AND NOT u.resolved
                      AND p.state IN ('failed', 'cancelled')
                    ORDER BY u.parent_id
                    LIMIT 1
                   ) AS dead ON true
             WHERE d.parent_id = ANY(frontier) AND c.state = 'cancelled'
               AND c.last_error->>'type' = 'parent_failed'
               AND (c.last_error->'details'->>'parent_id')::bigint = d.parent_id
        ),
        blamed AS (
            UPDATE jobq.jobs c
               SET last_error = jobq.parent_failed(x.dead_parent, x.dead_state),
                   updated_at = now()
              FROM candidates x
             WHERE c.id = x.id AND x.dead_parent IS NOT NULL
            RETURNING c.id
        ),
        revived AS (
            UPDATE jobq.jobs c
               SET state = CASE WHEN c.waiting_for > 0 THEN 'waiting'
                                ELSE 'queued' END::jobq.job_state,
                   finished_at = NULL,
                   last_error = NULL,
                   updated_at = now()
              FROM candidates x
             WHERE c.id = x.id AND x.dead_parent IS NULL AND NOT x.orphaned
            RETURNING c.id, c.has_dependents, c.queue, c.state, c.run_at
        ),
        announced AS MATERIALIZED (
            SELECT jobq.announce_due(r.queue, min(r.run_at), count(*))
              FROM revived r
             WHERE r.state = 'queued'
             GROUP BY r.queue
        )
        SELECT array_agg(r.id ORDER BY r.id) FILTER (WHERE r.has_dependents),
               (SELECT count(*) FROM announced) + (SELECT count(*) FROM blamed)
          INTO frontier, announcements
          FROM revived r;
    END LOOP;
END
$$;

--
-- Name: settle_dependents(bigint[], text[], bigint); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.settle_dependents(parents bigint[], states text[], only_child bigint DEFAULT NULL::bigint) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    frontier_ids bigint[] := parents;
    frontier_states text[] := states;
    announcements integer;
BEGIN
    WHILE coalesce(cardinality(frontier_ids), 0) > 0 LOOP
        WITH frontier AS (
            SELECT f.id, f.state FROM unnest(frontier_ids, frontier_states) AS f(id, state)
        ),
        satisfied AS (
            UPDATE jobq.job_dependencies d
               SET resolved = true
              FROM frontier f, jobq.jobs c
             WHERE d.parent_id = f.id AND NOT d.resolved AND c.id = d.child_id
               AND (only_child IS NULL OR d.child_id = only_child)
               AND (f.state = 'succeeded' OR c.run_on_parent_failure)
            RETURNING d.child_id
        ),
        counted AS (
            SELECT s.child_id, count(*)::integer AS edges FROM satisfied s GROUP BY s.child_id
        ),
        released AS (
            UPDATE jobq.jobs c
               SET waiting_for = c.waiting_for - n.edges,
                   state = CASE WHEN c.state = 'waiting' AND c.waiting_for = n.edges
                                THEN 'queued' ELSE c.state END,
                   updated_at = now()
              FROM counted n
             WHERE c.id = n.child_id
            RETURNING c.queue, c.state, c.run_at
        ),
        announced AS MATERIALIZED (
            SELECT jobq.announce_due(r.queue, min(r.run_at), count(*))
              FROM released r
             WHERE r.state = 'queued'
             GROUP BY r.queue
        )
        SELECT count(*) INTO announcements FROM announced;
        EXIT WHEN 'succeeded' = ALL(frontier_states);  -- it fails no child

        -- The waiting children a parent that did not succeed fails (named by the first
        -- such parent), and among them the next level: those with dependents of their own.
        WITH frontier AS (
            SELECT f.id, f.state FROM unnest(frontier_ids, frontier_states) AS f(id, state)
             WHERE f.state <> 'succeeded'
        ),
        doomed AS (
            SELECT DISTINCT ON (d.child_id) d.child_id, f.id AS parent_id, f.state AS parent_state
              FROM frontier f
              JOIN jobq.job_dependencies d ON d.parent_id = f.id AND NOT d.resolved
             WHERE only_child IS NULL OR d.child_id = only_child
             ORDER BY d.child_id, f.id
        ),
        cancelled AS (
            UPDATE jobq.jobs c
               SET state = 'cancelled',
                   finished_at = now(),
                   updated_at = now(),
                   last_error = jobq.parent_failed(x.parent_id, x.parent_state)
              FROM doomed x
             WHERE c.id = x.child_id AND c.state = 'waiting' AND NOT c.run_on_parent_failure
            RETURNING c.id, c.has_dependents
        )
        SELECT array_agg(k.id ORDER BY k.id) FILTER (WHERE k.has_dependents)
          INTO frontier_ids
          FROM cancelled k;
        frontier_states := array_fill('cancelled'::text,
                                      ARRAY[coalesce(cardinality(frontier_ids), 0)]);
        only_child := NULL;
    END LOOP;
END
$$;

--
-- Name: stamp_events(integer); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.stamp_events(batch_size integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    last bigint;
    stamped integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(7669456927906070544) THEN  -- 0x6A6F_6271_0000_0010: "jobq", 16
        RETURN NULL;
    END IF;
    SELECT coalesce(max(position), 0) INTO last FROM jobq.job_events;
    WITH batch AS (
        SELECT ctid AS row, last + row_number() OVER (ORDER BY id) AS position
          FROM (SELECT ctid, id FROM jobq.job_events
                 WHERE position IS NULL ORDER BY id LIMIT batch_size) AS unstamped
    )
    UPDATE jobq.job_events e SET position = b.position FROM batch b WHERE e.ctid = b.row;
    GET DIAGNOSTICS stamped = ROW_COUNT;
    IF stamped > 0 THEN
        PERFORM pg_notify('jobq_events', (last + stamped)::text);
    END IF;
    RETURN stamped;
END
$$;

--
-- Name: sync_fair_keys(text); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.sync_fair_keys(queue text) RETURNS TABLE(keyless bigint, added bigint, dropped bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    LOCK TABLE jobq.jobs IN SHARE MODE;
    RETURN QUERY
    WITH settings AS MATERIALIZED (
        SELECT q.ordering = 'fair' AS fair FROM jobq.queues q WHERE q.name = sync_fair_keys.queue
    ),
    keyless AS (
        UPDATE jobq.jobs j
           SET fairness_key = ''
         WHERE j.queue = sync_fair_keys.queue AND j.state = 'queued'
           AND j.fairness_key IS NULL AND (SELECT fair FROM settings)
        RETURNING 1
    ),
    added AS (
        INSERT INTO jobq.fair_keys (queue, key, pass)
        SELECT DISTINCT sync_fair_keys.queue, coalesce(j.fairness_key, ''),
               coalesce((SELECT min(k.pass) FROM jobq.fair_keys k
                          WHERE k.queue = sync_fair_keys.queue), 0)
          FROM jobq.jobs j
         WHERE j.queue = sync_fair_keys.queue AND j.state = 'queued'
           AND (SELECT fair FROM settings)
            ON CONFLICT (queue, key) DO NOTHING
        RETURNING 1
    ),
    dropped AS (
        DELETE FROM jobq.fair_keys k
         WHERE k.queue = sync_fair_keys.queue
           AND NOT coalesce((SELECT fair FROM settings), false)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM keyless), (SELECT count(*) FROM added),
           (SELECT count(*) FROM dropped);
END
$$;

--
-- Name: unique_holder(text, text, text, timestamp with time zone); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.unique_holder(queue text, type text, key text, since timestamp with time zone) RETURNS SETOF jobq.jobs
    LANGUAGE sql STABLE
    AS $$
    SELECT * FROM jobq.jobs j
     WHERE j.queue = unique_holder.queue AND j.type = unique_holder.type
       AND j.unique_key = unique_holder.key AND j.unique_since = unique_holder.since
       AND j.unique_key IS NOT NULL AND (j.unique_states & jobq.unique_state_bit(j.state)) <> 0
$$;

--
-- Name: unique_since(jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.unique_since(options jsonb) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN options IS NULL THEN NULL
                WHEN options->>'period' IS NULL THEN '-infinity'::timestamptz
                ELSE to_timestamp(floor(extract(epoch FROM now()) / (options->>'period')::integer)
                                  * (options->>'period')::integer) END
$$;

--
-- Name: unique_state_bit(jobq.job_state); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.unique_state_bit(state jobq.job_state) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE state
        WHEN 'waiting' THEN 1
        WHEN 'queued' THEN 2
        WHEN 'running' THEN 4
        WHEN 'succeeded' THEN 8
        WHEN 'failed' THEN 16
        WHEN 'cancelled' THEN 32
        ELSE 0
    END::smallint
$$;

--
-- Name: unique_states_mask(jsonb); Type: FUNCTION; Schema: jobq; Owner: -
--

CREATE FUNCTION jobq.unique_states_mask(options jsonb) RETURNS smallint
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN options IS NULL THEN NULL
                ELSE (SELECT bit_or(jobq.unique_state_bit(s::jobq.job_state))
                        FROM jsonb_array_elements_text(
                                 coalesce(options->'states',
                                          '["waiting", "queued", "running", "succeeded"]')) AS s)
           END
$$;

--
-- Name: alembic_version; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.alembic_version (
    version_num character varying(32) NOT NULL
);

--
-- Name: api_keys; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.api_keys (
    id bigint NOT NULL,
    name text NOT NULL,
    lookup_id text NOT NULL,
    secret_hash bytea NOT NULL,
    scopes text[] NOT NULL,
    queues text[],
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_keys_scopes_check CHECK (((cardinality(scopes) >= 1) AND (scopes <@ ARRAY['enqueue'::text, 'work'::text, 'read'::text, 'admin'::text]))),
    CONSTRAINT api_keys_secret_hash_check CHECK ((octet_length(secret_hash) = 32))
);

--
-- Name: api_keys_id_seq; Type: SEQUENCE; Schema: jobq; Owner: -
--

ALTER TABLE jobq.api_keys ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME jobq.api_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: audit_log; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    key_name text,
    action text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    queue text,
    job_id bigint,
    target text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    status smallint NOT NULL,
    request_id text NOT NULL
);

--
-- Name: TABLE audit_log; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.audit_log IS 'Who did which admin action when, and how it ended; refused attempts too.';

--
-- Name: audit_log_id_seq; Type: SEQUENCE; Schema: jobq; Owner: -
--

CREATE SEQUENCE jobq.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: audit_log_id_seq; Type: SEQUENCE OWNED BY; Schema: jobq; Owner: -
--

ALTER SEQUENCE jobq.audit_log_id_seq OWNED BY jobq.audit_log.id;

--
-- Name: dead_job_counts; Type: VIEW; Schema: jobq; Owner: -
--

CREATE VIEW jobq.dead_job_counts AS
 SELECT queue,
    count(*) FILTER (WHERE (state = 'failed'::jobq.job_state)) AS failed,
    count(*) FILTER (WHERE (state = 'cancelled'::jobq.job_state)) AS cancelled
   FROM jobq.jobs
  WHERE (state = ANY (ARRAY['failed'::jobq.job_state, 'cancelled'::jobq.job_state]))
  GROUP BY queue;

--
-- Name: delivery_breakers; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.delivery_breakers (
    target text NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    trips integer DEFAULT 0 NOT NULL,
    open_until timestamp with time zone,
    failed_at timestamp with time zone,
    last_error text,
    CONSTRAINT delivery_breakers_failures_check CHECK ((failures >= 0)),
    CONSTRAINT delivery_breakers_trips_check CHECK ((trips >= 0))
);

--
-- Name: event_subscriptions; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.event_subscriptions (
    name text NOT NULL,
    url text NOT NULL,
    queues text[],
    types text[],
    kinds text[],
    secrets text[] NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    "position" bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_id uuid,
    leased_until timestamp with time zone,
    last_status integer,
    last_error text,
    delivered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    missed bigint DEFAULT 0 NOT NULL,
    CONSTRAINT event_subscriptions_secrets_check CHECK (((cardinality(secrets) >= 1) AND (cardinality(secrets) <= 2)))
);

--
-- Name: TABLE event_subscriptions; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.event_subscriptions IS 'Endpoints that receive job events, each with its cursor in jobq.job_events.';

--
-- Name: failed_group_counts; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.failed_group_counts (
    queue text NOT NULL,
    type text NOT NULL,
    error_type text,
    jobs bigint NOT NULL
);

--
-- Name: TABLE failed_group_counts; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.failed_group_counts IS 'Each queue''s failed jobs by type and error type (last_error->>''type''), folded from jobq.failed_group_deltas; groups at 0 are deleted by the maintenance leader.';

--
-- Name: failed_group_deltas; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.failed_group_deltas (
    queue text NOT NULL,
    type text NOT NULL,
    error_type text,
    n bigint NOT NULL
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='5000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='5000', autovacuum_vacuum_cost_delay='0');

--
-- Name: TABLE failed_group_deltas; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.failed_group_deltas IS 'Changes to jobq.failed_group_counts not yet folded: a statement''s net change to each group of failed jobs it moved.';

--
-- Name: fair_key_rate_log; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.fair_key_rate_log (
    queue text NOT NULL,
    key text NOT NULL,
    at timestamp with time zone NOT NULL,
    jobs integer NOT NULL,
    CONSTRAINT fair_key_rate_log_jobs_check CHECK ((jobs >= 1))
);

--
-- Name: fair_keys; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.fair_keys (
    queue text NOT NULL,
    key text NOT NULL,
    pass double precision NOT NULL
);

--
-- Name: job_counts; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.job_counts (
    queue text NOT NULL,
    state jobq.job_state NOT NULL,
    jobs bigint NOT NULL
);

--
-- Name: job_dependencies; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.job_dependencies (
    child_id bigint NOT NULL,
    parent_id bigint NOT NULL,
    resolved boolean DEFAULT false NOT NULL,
    depth integer DEFAULT 1 NOT NULL
);

--
-- Name: job_events; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.job_events (
    id bigint NOT NULL,
    "position" bigint,
    at timestamp with time zone DEFAULT now() NOT NULL,
    kind jobq.event_kind NOT NULL,
    queue text NOT NULL,
    job_id bigint,
    type text,
    attempt integer
)
WITH (fillfactor='90', autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.02', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');

--
-- Name: TABLE job_events; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.job_events IS 'Job and queue events, written in the transaction of the change; read in position order.';

--
-- Name: job_events_id_seq; Type: SEQUENCE; Schema: jobq; Owner: -
--

ALTER TABLE jobq.job_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME jobq.job_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: job_stat_deltas; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.job_stat_deltas (
    queue text NOT NULL,
    kind text NOT NULL,
    state jobq.job_state,
    minute timestamp with time zone,
    bucket smallint,
    n bigint NOT NULL,
    CONSTRAINT job_stat_deltas_kind_check CHECK ((kind = ANY (ARRAY['jobs'::text, 'enqueued'::text, 'succeeded'::text, 'failed'::text, 'wait'::text, 'run'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='5000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='5000', autovacuum_vacuum_cost_delay='0');

--
-- Name: TABLE job_stat_deltas; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.job_stat_deltas IS 'Changes to the statistics not yet folded into jobq.job_counts and jobq.queue_minutes: kind ''jobs'' moves a count by state; the others add to a minute (''wait'', ''run'': to a duration bucket).';

--
-- Name: jobs_id_seq; Type: SEQUENCE; Schema: jobq; Owner: -
--

ALTER TABLE jobq.jobs ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME jobq.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: live_jobs; Type: VIEW; Schema: jobq; Owner: -
--

CREATE VIEW jobq.live_jobs AS
 SELECT jobs.queue,
    jobs.state,
    jobs.run_at,
    jobs.created_at,
    jobs.started_at,
    jobs.attempted_at,
    jobs.finished_at
   FROM jobq.jobs
  WHERE (jobs.state = 'queued'::jobq.job_state)
UNION ALL
 SELECT jobs.queue,
    jobs.state,
    jobs.run_at,
    jobs.created_at,
    jobs.started_at,
    jobs.attempted_at,
    jobs.finished_at
   FROM jobq.jobs
  WHERE (jobs.state = 'running'::jobq.job_state)
UNION ALL
 SELECT jobs.queue,
    jobs.state,
    jobs.run_at,
    jobs.created_at,
    jobs.started_at,
    jobs.attempted_at,
    jobs.finished_at
   FROM jobq.jobs
  WHERE (jobs.state = 'waiting'::jobq.job_state);

--
-- Name: maintenance_runs; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.maintenance_runs (
    task text NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    jobs integer NOT NULL
);

--
-- Name: push_minutes; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.push_minutes (
    queue text NOT NULL,
    minute timestamp with time zone NOT NULL,
    deliveries bigint DEFAULT 0 NOT NULL,
    classes jsonb DEFAULT '{}'::jsonb NOT NULL,
    latency_buckets jsonb DEFAULT '{}'::jsonb NOT NULL
);

--
-- Name: TABLE push_minutes; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.push_minutes IS 'Deliveries to pushed queues'' targets per minute: by outcome class and by latency bucket (jobq.duration_bucket), added by each replica''s dispatcher.';

--
-- Name: push_targets; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.push_targets (
    queue text NOT NULL,
    url text NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    timeout_seconds double precision NOT NULL,
    secrets text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT push_targets_headers_check CHECK ((jsonb_typeof(headers) = 'object'::text)),
    CONSTRAINT push_targets_secrets_check CHECK (((cardinality(secrets) >= 1) AND (cardinality(secrets) <= 2))),
    CONSTRAINT push_targets_timeout_seconds_check CHECK ((timeout_seconds > (0)::double precision))
);

--
-- Name: queue_minutes; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queue_minutes (
    queue text NOT NULL,
    minute timestamp with time zone NOT NULL,
    enqueued bigint DEFAULT 0 NOT NULL,
    succeeded bigint DEFAULT 0 NOT NULL,
    failed bigint DEFAULT 0 NOT NULL,
    wait_buckets jsonb DEFAULT '{}'::jsonb NOT NULL,
    run_buckets jsonb DEFAULT '{}'::jsonb NOT NULL
);

--
-- Name: queue_rate_log; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queue_rate_log (
    queue text NOT NULL,
    at timestamp with time zone NOT NULL,
    jobs integer NOT NULL,
    CONSTRAINT queue_rate_log_jobs_check CHECK ((jobs >= 1))
);

--
-- Name: queue_recent; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queue_recent (
    queue text NOT NULL,
    kind text NOT NULL,
    bucket smallint NOT NULL,
    jobs bigint NOT NULL,
    CONSTRAINT queue_recent_kind_check CHECK ((kind = ANY (ARRAY['enqueued'::text, 'succeeded'::text, 'failed'::text, 'wait'::text, 'run'::text])))
);

--
-- Name: TABLE queue_recent; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.queue_recent IS 'Each queue''s jobs enqueued, succeeded and failed (bucket 0) and wait and run histograms summed over the minutes from jobq.queue_recent_window.since on (kept by the statistics'' fold).';

--
-- Name: queue_recent_window; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queue_recent_window (
    one boolean DEFAULT true NOT NULL,
    since timestamp with time zone NOT NULL,
    CONSTRAINT queue_recent_window_one_check CHECK (one)
);

--
-- Name: TABLE queue_recent_window; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.queue_recent_window IS 'The first minute jobq.queue_recent covers: the minute an hour before the last fold''s.';

--
-- Name: queue_types; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queue_types (
    queue text NOT NULL,
    type text NOT NULL,
    last_leased_at timestamp with time zone NOT NULL
);

--
-- Name: queues; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.queues (
    name text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    paused_at timestamp with time zone,
    max_backlog integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_running integer,
    max_running_per_key integer,
    rate_limit_jobs integer,
    rate_limit_seconds double precision,
    max_attempts integer,
    lease_seconds integer,
    backoff_base_seconds double precision,
    backoff_cap_seconds double precision,
    backoff_jitter double precision,
    retain_succeeded_seconds double precision,
    retain_failed_seconds double precision,
    ordering text DEFAULT 'fifo'::text NOT NULL,
    fair_weights jsonb,
    rate_limit_per_key_jobs integer,
    rate_limit_per_key_seconds double precision,
    aging_seconds double precision,
    aging_max integer,
    limited boolean GENERATED ALWAYS AS (((max_running IS NOT NULL) OR (max_running_per_key IS NOT NULL) OR (rate_limit_jobs IS NOT NULL) OR (ordering = 'fair'::text))) STORED,
    timeout_seconds integer,
    CONSTRAINT aging_whole CHECK (((aging_seconds IS NULL) = (aging_max IS NULL))),
    CONSTRAINT fair_limits_need_fair_ordering CHECK (((ordering = 'fair'::text) OR ((rate_limit_per_key_jobs IS NULL) AND (aging_seconds IS NULL)))),
    CONSTRAINT fair_ordering_without_max_running_per_key CHECK (((ordering = 'fifo'::text) OR (max_running_per_key IS NULL))),
    CONSTRAINT queues_aging_max_check CHECK ((aging_max >= 1)),
    CONSTRAINT queues_aging_seconds_check CHECK ((aging_seconds > (0)::double precision)),
    CONSTRAINT queues_backoff_base_seconds_check CHECK ((backoff_base_seconds >= (0)::double precision)),
    CONSTRAINT queues_backoff_cap_seconds_check CHECK ((backoff_cap_seconds >= (0)::double precision)),
    CONSTRAINT queues_backoff_jitter_check CHECK (((backoff_jitter >= (0)::double precision) AND (backoff_jitter < (1)::double precision))),
    CONSTRAINT queues_fair_weights_check CHECK ((jsonb_typeof(fair_weights) = 'object'::text)),
    CONSTRAINT queues_lease_seconds_check CHECK ((lease_seconds >= 1)),
    CONSTRAINT queues_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT queues_max_backlog_check CHECK ((max_backlog >= 1)),
    CONSTRAINT queues_max_running_check CHECK ((max_running >= 1)),
    CONSTRAINT queues_max_running_per_key_check CHECK ((max_running_per_key >= 1)),
    CONSTRAINT queues_ordering_check CHECK ((ordering = ANY (ARRAY['fifo'::text, 'fair'::text]))),
    CONSTRAINT queues_rate_limit_jobs_check CHECK ((rate_limit_jobs >= 1)),
    CONSTRAINT queues_rate_limit_per_key_jobs_check CHECK ((rate_limit_per_key_jobs >= 1)),
    CONSTRAINT queues_rate_limit_per_key_seconds_check CHECK ((rate_limit_per_key_seconds > (0)::double precision)),
    CONSTRAINT queues_rate_limit_seconds_check CHECK ((rate_limit_seconds > (0)::double precision)),
    CONSTRAINT queues_retain_failed_seconds_check CHECK ((retain_failed_seconds >= (0)::double precision)),
    CONSTRAINT queues_retain_succeeded_seconds_check CHECK ((retain_succeeded_seconds >= (0)::double precision)),
    CONSTRAINT queues_timeout_seconds_check CHECK ((timeout_seconds >= 1)),
    CONSTRAINT rate_limit_per_key_whole CHECK (((rate_limit_per_key_jobs IS NULL) = (rate_limit_per_key_seconds IS NULL))),
    CONSTRAINT rate_limit_whole CHECK (((rate_limit_jobs IS NULL) = (rate_limit_seconds IS NULL)))
);

--
-- Name: schedule_runs; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.schedule_runs (
    schedule text NOT NULL,
    tick timestamp with time zone NOT NULL,
    job_id bigint,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    refused text
);

--
-- Name: schedules; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.schedules (
    name text NOT NULL,
    queue text NOT NULL,
    type text NOT NULL,
    payload jsonb DEFAULT 'null'::jsonb NOT NULL,
    cron text NOT NULL,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    max_attempts integer,
    lease_seconds integer,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    catch_up text DEFAULT 'latest'::text NOT NULL,
    catch_up_limit integer DEFAULT 100 NOT NULL,
    next_tick timestamp with time zone NOT NULL,
    last_tick timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schedules_catch_up_check CHECK ((catch_up = ANY (ARRAY['latest'::text, 'none'::text, 'all'::text]))),
    CONSTRAINT schedules_catch_up_limit_check CHECK ((catch_up_limit >= 1))
);

--
-- Name: workers; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.workers (
    worker_id text NOT NULL,
    sdk text,
    version text,
    host text,
    queues text[],
    types text[],
    first_seen timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL,
    leased bigint DEFAULT 0 NOT NULL,
    finished bigint DEFAULT 0 NOT NULL,
    window_at timestamp with time zone DEFAULT now() NOT NULL,
    window_finished bigint DEFAULT 0 NOT NULL,
    finished_per_minute double precision DEFAULT 0 NOT NULL,
    quiet boolean DEFAULT false NOT NULL,
    quiet_at timestamp with time zone,
    quieted_by text
);

--
-- Name: TABLE workers; Type: COMMENT; Schema: jobq; Owner: -
--

COMMENT ON TABLE jobq.workers IS 'Workers seen by any replica: what they serve, when last seen, whether quiet.';

--
-- Name: audit_log id; Type: DEFAULT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.audit_log ALTER COLUMN id SET DEFAULT nextval('jobq.audit_log_id_seq'::regclass);

--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

--
-- Name: api_keys api_keys_lookup_id_key; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.api_keys
    ADD CONSTRAINT api_keys_lookup_id_key UNIQUE (lookup_id);

--
-- Name: api_keys api_keys_name_key; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.api_keys
    ADD CONSTRAINT api_keys_name_key UNIQUE (name);

--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

--
-- Name: delivery_breakers delivery_breakers_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.delivery_breakers
    ADD CONSTRAINT delivery_breakers_pkey PRIMARY KEY (target);

--
-- Name: enqueue_limits enqueue_limits_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.enqueue_limits
    ADD CONSTRAINT enqueue_limits_pkey PRIMARY KEY (one);

--
-- Name: event_subscriptions event_subscriptions_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.event_subscriptions
    ADD CONSTRAINT event_subscriptions_pkey PRIMARY KEY (name);

--
-- Name: failed_group_counts failed_group_counts_queue_type_error_type_key; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.failed_group_counts
    ADD CONSTRAINT failed_group_counts_queue_type_error_type_key UNIQUE NULLS NOT DISTINCT (queue, type, error_type);

--
-- Name: fair_keys fair_keys_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.fair_keys
    ADD CONSTRAINT fair_keys_pkey PRIMARY KEY (queue, key);

--
-- Name: job_counts job_counts_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.job_counts
    ADD CONSTRAINT job_counts_pkey PRIMARY KEY (queue, state);

--
-- Name: job_dependencies job_dependencies_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.job_dependencies
    ADD CONSTRAINT job_dependencies_pkey PRIMARY KEY (child_id, parent_id);

--
-- Name: jobs jobs_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

--
-- Name: maintenance_runs maintenance_runs_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.maintenance_runs
    ADD CONSTRAINT maintenance_runs_pkey PRIMARY KEY (task);

--
-- Name: push_minutes push_minutes_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.push_minutes
    ADD CONSTRAINT push_minutes_pkey PRIMARY KEY (queue, minute);

--
-- Name: push_targets push_targets_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.push_targets
    ADD CONSTRAINT push_targets_pkey PRIMARY KEY (queue);

--
-- Name: queue_minutes queue_minutes_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.queue_minutes
    ADD CONSTRAINT queue_minutes_pkey PRIMARY KEY (queue, minute);

--
-- Name: queue_recent queue_recent_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.queue_recent
    ADD CONSTRAINT queue_recent_pkey PRIMARY KEY (queue, kind, bucket);

--
-- Name: queue_recent_window queue_recent_window_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.queue_recent_window
    ADD CONSTRAINT queue_recent_window_pkey PRIMARY KEY (one);

--
-- Name: queue_types queue_types_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.queue_types
    ADD CONSTRAINT queue_types_pkey PRIMARY KEY (queue, type);

--
-- Name: queues queues_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (name);

--
-- Name: schedule_runs schedule_runs_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.schedule_runs
    ADD CONSTRAINT schedule_runs_pkey PRIMARY KEY (schedule, tick);

--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);

--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: jobq; Owner: -
--

ALTER TABLE ONLY jobq.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (worker_id);

--
-- Name: audit_log_at; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX audit_log_at ON jobq.audit_log USING btree (at);

--
-- Name: fair_key_rate_log_at_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX fair_key_rate_log_at_idx ON jobq.fair_key_rate_log USING btree (queue, at);

--
-- Name: fair_key_rate_log_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX fair_key_rate_log_idx ON jobq.fair_key_rate_log USING btree (queue, key, at);

--
-- Name: fair_keys_pass_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX fair_keys_pass_idx ON jobq.fair_keys USING btree (queue, pass, key);

--
-- Name: job_dependencies_parent_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX job_dependencies_parent_idx ON jobq.job_dependencies USING btree (parent_id);

--
-- Name: job_events_position; Type: INDEX; Schema: jobq; Owner: -
--

CREATE UNIQUE INDEX job_events_position ON jobq.job_events USING btree ("position") WHERE ("position" IS NOT NULL);

--
-- Name: job_events_unstamped; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX job_events_unstamped ON jobq.job_events USING btree (id) WHERE ("position" IS NULL);

--
-- Name: jobs_claim_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_claim_idx ON jobq.jobs USING btree (queue, priority DESC, run_at, id) WHERE (state = 'queued'::jobq.job_state);

--
-- Name: jobs_dead_by_id_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_dead_by_id_idx ON jobq.jobs USING btree (queue, state, id) WHERE (state = ANY (ARRAY['failed'::jobq.job_state, 'cancelled'::jobq.job_state]));

--
-- Name: jobs_dead_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_dead_idx ON jobq.jobs USING btree (queue, state, finished_at) WHERE (state = ANY (ARRAY['failed'::jobq.job_state, 'cancelled'::jobq.job_state]));

--
-- Name: jobs_failed_latest_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_failed_latest_idx ON jobq.jobs USING btree (queue, type, ((last_error ->> 'type'::text)), finished_at) WHERE (state = 'failed'::jobq.job_state);

--
-- Name: jobs_fair_claim_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_fair_claim_idx ON jobq.jobs USING btree (queue, fairness_key, priority DESC, run_at, id) WHERE ((state = 'queued'::jobq.job_state) AND (fairness_key IS NOT NULL));

--
-- Name: jobs_finished_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_finished_idx ON jobq.jobs USING btree (finished_at) WHERE (finished_at IS NOT NULL);

--
-- Name: jobs_idempotency_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE UNIQUE INDEX jobs_idempotency_idx ON jobq.jobs USING btree (queue, idempotency_key) WHERE (idempotency_key IS NOT NULL);

--
-- Name: jobs_key_claim_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_key_claim_idx ON jobq.jobs USING btree (queue, concurrency_key, priority DESC, run_at, id) WHERE ((state = 'queued'::jobq.job_state) AND (concurrency_key IS NOT NULL));

--
-- Name: jobs_running_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_running_idx ON jobq.jobs USING btree (queue, concurrency_key) WITH (deduplicate_items=off) WHERE (state = 'running'::jobq.job_state);

--
-- Name: jobs_start_by_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_start_by_idx ON jobq.jobs USING btree (start_by) WHERE ((start_by IS NOT NULL) AND (state = ANY (ARRAY['waiting'::jobq.job_state, 'queued'::jobq.job_state])));

--
-- Name: jobs_unique_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE UNIQUE INDEX jobs_unique_idx ON jobq.jobs USING btree (queue, type, unique_key, unique_since) WHERE ((unique_key IS NOT NULL) AND ((unique_states & jobq.unique_state_bit(state)) <> 0));

--
-- Name: jobs_waiting_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX jobs_waiting_idx ON jobq.jobs USING btree (queue) WHERE (state = 'waiting'::jobq.job_state);

--
-- Name: push_minutes_minute_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX push_minutes_minute_idx ON jobq.push_minutes USING btree (minute);

--
-- Name: queue_minutes_minute_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX queue_minutes_minute_idx ON jobq.queue_minutes USING btree (minute);

--
-- Name: queue_rate_log_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX queue_rate_log_idx ON jobq.queue_rate_log USING btree (queue, at);

--
-- Name: schedules_due_idx; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX schedules_due_idx ON jobq.schedules USING btree (next_tick) WHERE (NOT paused);

--
-- Name: workers_last_seen; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX workers_last_seen ON jobq.workers USING btree (last_seen);

--
-- Name: workers_quiet; Type: INDEX; Schema: jobq; Owner: -
--

CREATE INDEX workers_quiet ON jobq.workers USING btree (worker_id) WHERE quiet;

--
-- Name: job_dependencies job_dependencies_checked_at_commit; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE CONSTRAINT TRIGGER job_dependencies_checked_at_commit AFTER INSERT ON jobq.job_dependencies DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION jobq.check_new_dependencies();

--
-- Name: jobs jobs_count_deletes; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_count_deletes AFTER DELETE ON jobq.jobs REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

--
-- Name: jobs jobs_count_inserts; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_count_inserts AFTER INSERT ON jobq.jobs REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

--
-- Name: jobs jobs_count_updates; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_count_updates AFTER UPDATE ON jobq.jobs REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.count_job_changes();

--
-- Name: jobs jobs_fair_key_inserted; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_fair_key_inserted AFTER INSERT ON jobq.jobs FOR EACH ROW WHEN (((new.state = 'queued'::jobq.job_state) AND (new.fairness_key IS NOT NULL))) EXECUTE FUNCTION jobq.fair_key_queued();

--
-- Name: jobs jobs_fair_key_requeued; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_fair_key_requeued AFTER UPDATE OF state ON jobq.jobs FOR EACH ROW WHEN (((new.state = 'queued'::jobq.job_state) AND (old.state <> 'queued'::jobq.job_state) AND (new.fairness_key IS NOT NULL))) EXECUTE FUNCTION jobq.fair_key_queued();

--
-- Name: jobs jobs_forget_counts; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_forget_counts AFTER TRUNCATE ON jobq.jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.forget_job_counts();

--
-- Name: jobs jobs_forget_dependencies; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_forget_dependencies AFTER DELETE ON jobq.jobs FOR EACH ROW WHEN ((old.has_parents OR old.has_dependents)) EXECUTE FUNCTION jobq.after_job_delete();

--
-- Name: jobs jobs_record_changes; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_record_changes AFTER UPDATE ON jobq.jobs REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_jobs_changed();

--
-- Name: jobs jobs_record_enqueued; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_record_enqueued AFTER INSERT ON jobq.jobs REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_jobs_enqueued();

--
-- Name: jobs jobs_settle_dependents; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER jobs_settle_dependents AFTER UPDATE OF state ON jobq.jobs FOR EACH ROW WHEN ((new.has_dependents OR new.notify_finish)) EXECUTE FUNCTION jobq.after_job_state_change();

--
-- Name: queues queues_record_changes; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER queues_record_changes AFTER UPDATE ON jobq.queues REFERENCING OLD TABLE AS old_queues NEW TABLE AS new_queues FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_queues_changed();

--
-- Name: queues queues_record_created; Type: TRIGGER; Schema: jobq; Owner: -
--

CREATE TRIGGER queues_record_created AFTER INSERT ON jobq.queues REFERENCING NEW TABLE AS new_queues FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_queues_changed();

--
-- Name: SCHEMA jobq; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA jobq TO jobq_producer;

--
-- Name: FUNCTION add_buckets(a jsonb, b jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.add_buckets(a jsonb, b jsonb) FROM PUBLIC;

--
-- Name: FUNCTION after_job_delete(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.after_job_delete() FROM PUBLIC;

--
-- Name: FUNCTION after_job_state_change(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.after_job_state_change() FROM PUBLIC;

--
-- Name: FUNCTION announce_due(queue text, due timestamp with time zone, jobs bigint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.announce_due(queue text, due timestamp with time zone, jobs bigint) FROM PUBLIC;

--
-- Name: FUNCTION attempt_record(attempt integer, lease_id uuid, worker_id text, key_id bigint, started_at timestamp with time zone, outcome text, error jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.attempt_record(attempt integer, lease_id uuid, worker_id text, key_id bigint, started_at timestamp with time zone, outcome text, error jsonb) FROM PUBLIC;

--
-- Name: FUNCTION attempts_of(job jobq.jobs); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.attempts_of(job jobq.jobs) FROM PUBLIC;

--
-- Name: FUNCTION backlog_refusal(queue text, keys text[]); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.backlog_refusal(queue text, keys text[]) FROM PUBLIC;

--
-- Name: FUNCTION blocking_parent(child bigint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.blocking_parent(child bigint) FROM PUBLIC;

--
-- Name: FUNCTION bucket_seconds(bucket smallint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.bucket_seconds(bucket smallint) FROM PUBLIC;

--
-- Name: FUNCTION check_fairness_key(fairness_key text, field text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_fairness_key(fairness_key text, field text) FROM PUBLIC;

--
-- Name: FUNCTION check_job(limits jobq.enqueue_limits, queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, on_parent_failure text, concurrency_key text, parents integer); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_job(limits jobq.enqueue_limits, queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, on_parent_failure text, concurrency_key text, parents integer) FROM PUBLIC;

--
-- Name: FUNCTION check_lifecycle(timeout_seconds integer, start_by timestamp with time zone, at text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_lifecycle(timeout_seconds integer, start_by timestamp with time zone, at text) FROM PUBLIC;

--
-- Name: FUNCTION check_new_dependencies(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_new_dependencies() FROM PUBLIC;

--
-- Name: FUNCTION check_trace(traceparent text, tracestate text, at text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_trace(traceparent text, tracestate text, at text) FROM PUBLIC;

--
-- Name: FUNCTION check_trace_of(trace jsonb, at text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_trace_of(trace jsonb, at text) FROM PUBLIC;

--
-- Name: FUNCTION check_unique(options jsonb, field text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.check_unique(options jsonb, field text) FROM PUBLIC;

--
-- Name: FUNCTION count_job_changes(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.count_job_changes() FROM PUBLIC;

--
-- Name: FUNCTION duration_bucket(seconds double precision); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.duration_bucket(seconds double precision) FROM PUBLIC;

--
-- Name: FUNCTION enqueue(queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, depends_on bigint[], on_parent_failure text, concurrency_key text, parent_queues text[], parent_queue_patterns text[], fairness_key text, unique_key text, unique_period integer, unique_states text[], unique_on_conflict text, timeout_seconds integer, start_by timestamp with time zone, traceparent text, tracestate text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.enqueue(queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, depends_on bigint[], on_parent_failure text, concurrency_key text, parent_queues text[], parent_queue_patterns text[], fairness_key text, unique_key text, unique_period integer, unique_states text[], unique_on_conflict text, timeout_seconds integer, start_by timestamp with time zone, traceparent text, tracestate text) FROM PUBLIC;
GRANT ALL ON FUNCTION jobq.enqueue(queue text, type text, payload jsonb, priority integer, run_at timestamp with time zone, delay_seconds double precision, max_attempts integer, lease_seconds integer, idempotency_key text, metadata jsonb, depends_on bigint[], on_parent_failure text, concurrency_key text, parent_queues text[], parent_queue_patterns text[], fairness_key text, unique_key text, unique_period integer, unique_states text[], unique_on_conflict text, timeout_seconds integer, start_by timestamp with time zone, traceparent text, tracestate text) TO jobq_producer;

--
-- Name: FUNCTION enqueue_limits_for(queue text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.enqueue_limits_for(queue text) FROM PUBLIC;

--
-- Name: FUNCTION enqueue_many(queue text, jobs jsonb, parent_queues text[], parent_queue_patterns text[]); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.enqueue_many(queue text, jobs jsonb, parent_queues text[], parent_queue_patterns text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION jobq.enqueue_many(queue text, jobs jsonb, parent_queues text[], parent_queue_patterns text[]) TO jobq_producer;

--
-- Name: FUNCTION fair_key_queued(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.fair_key_queued() FROM PUBLIC;

--
-- Name: FUNCTION forget_fair_key(queue text, key text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.forget_fair_key(queue text, key text) FROM PUBLIC;

--
-- Name: FUNCTION forget_job_counts(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.forget_job_counts() FROM PUBLIC;

--
-- Name: FUNCTION histogram_percentiles(buckets smallint[], jobs double precision[]); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.histogram_percentiles(buckets smallint[], jobs double precision[]) FROM PUBLIC;

--
-- Name: FUNCTION insert_jobs(queue text, types text[], payloads jsonb[], priorities integer[], run_ats timestamp with time zone[], delays double precision[], max_attempts integer[], lease_seconds integer[], idempotency_keys text[], metadatas jsonb[], concurrency_keys text[], default_max_attempts integer, default_lease_seconds integer, waiting_fors integer[], runs_on_parent_failure boolean[], parent_failures jsonb[], fairness_keys text[], uniques jsonb[], timeouts integer[], start_bys timestamp with time zone[], traceparents text[], tracestates text[]); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.insert_jobs(queue text, types text[], payloads jsonb[], priorities integer[], run_ats timestamp with time zone[], delays double precision[], max_attempts integer[], lease_seconds integer[], idempotency_keys text[], metadatas jsonb[], concurrency_keys text[], default_max_attempts integer, default_lease_seconds integer, waiting_fors integer[], runs_on_parent_failure boolean[], parent_failures jsonb[], fairness_keys text[], uniques jsonb[], timeouts integer[], start_bys timestamp with time zone[], traceparents text[], tracestates text[]) FROM PUBLIC;

--
-- Name: FUNCTION job_stats_of(queue text, state jobq.job_state, created_at timestamp with time zone, started_at timestamp with time zone, attempted_at timestamp with time zone, finished_at timestamp with time zone, sign integer, history boolean); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.job_stats_of(queue text, state jobq.job_state, created_at timestamp with time zone, started_at timestamp with time zone, attempted_at timestamp with time zone, finished_at timestamp with time zone, sign integer, history boolean) FROM PUBLIC;

--
-- Name: FUNCTION json_depth(doc jsonb, stop_after integer); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.json_depth(doc jsonb, stop_after integer) FROM PUBLIC;

--
-- Name: FUNCTION lease_fair(queue text, types text[], max_jobs integer, lease_seconds integer, worker_id text, key_id bigint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.lease_fair(queue text, types text[], max_jobs integer, lease_seconds integer, worker_id text, key_id bigint) FROM PUBLIC;

--
-- Name: FUNCTION minute_entries(enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.minute_entries(enqueued bigint, succeeded bigint, failed bigint, wait_buckets jsonb, run_buckets jsonb) FROM PUBLIC;

--
-- Name: FUNCTION new_job_keys(queue text, types text[], keys text[], uniques jsonb[]); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.new_job_keys(queue text, types text[], keys text[], uniques jsonb[]) FROM PUBLIC;

--
-- Name: FUNCTION parent_failed(parent bigint, parent_state text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.parent_failed(parent bigint, parent_state text) FROM PUBLIC;

--
-- Name: FUNCTION queue_backlog(queue_name text, up_to integer); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_backlog(queue_name text, up_to integer) FROM PUBLIC;

--
-- Name: FUNCTION queue_job_counts(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_job_counts() FROM PUBLIC;

--
-- Name: FUNCTION queue_minute_stats(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_minute_stats() FROM PUBLIC;

--
-- Name: FUNCTION queue_overview(one text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_overview(one text) FROM PUBLIC;

--
-- Name: FUNCTION queue_retry_at(queue text, attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_retry_at(queue text, attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision) FROM PUBLIC;

--
-- Name: FUNCTION queue_settings_of(queue jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.queue_settings_of(queue jsonb) FROM PUBLIC;

--
-- Name: FUNCTION record_jobs_changed(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.record_jobs_changed() FROM PUBLIC;

--
-- Name: FUNCTION record_jobs_enqueued(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.record_jobs_enqueued() FROM PUBLIC;

--
-- Name: FUNCTION record_queues_changed(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.record_queues_changed() FROM PUBLIC;

--
-- Name: FUNCTION recount_statistics(); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.recount_statistics() FROM PUBLIC;

--
-- Name: FUNCTION retry_at(attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.retry_at(attempt integer, retry_after double precision, backoff_base double precision, backoff_cap double precision, backoff_jitter double precision) FROM PUBLIC;

--
-- Name: FUNCTION revive_dependents(parent bigint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.revive_dependents(parent bigint) FROM PUBLIC;

--
-- Name: FUNCTION settle_dependents(parents bigint[], states text[], only_child bigint); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.settle_dependents(parents bigint[], states text[], only_child bigint) FROM PUBLIC;

--
-- Name: FUNCTION stamp_events(batch_size integer); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.stamp_events(batch_size integer) FROM PUBLIC;

--
-- Name: FUNCTION sync_fair_keys(queue text); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.sync_fair_keys(queue text) FROM PUBLIC;

--
-- Name: FUNCTION unique_holder(queue text, type text, key text, since timestamp with time zone); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.unique_holder(queue text, type text, key text, since timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION unique_since(options jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.unique_since(options jsonb) FROM PUBLIC;

--
-- Name: FUNCTION unique_state_bit(state jobq.job_state); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.unique_state_bit(state jobq.job_state) FROM PUBLIC;

--
-- Name: FUNCTION unique_states_mask(options jsonb); Type: ACL; Schema: jobq; Owner: -
--

REVOKE ALL ON FUNCTION jobq.unique_states_mask(options jsonb) FROM PUBLIC;
