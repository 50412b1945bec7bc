-- Migration 0021: dependencies settled level by level, bounded, and checked at commit.
-- (See 0021_iterative_dependencies.py for what each part is for.)

-- The limits on what one enqueue may build (the service writes its settings here).
ALTER TABLE jobq.enqueue_limits
    ADD COLUMN max_dependency_depth integer NOT NULL DEFAULT 100
        CONSTRAINT enqueue_limits_max_dependency_depth_check CHECK (max_dependency_depth >= 1),
    ADD COLUMN max_batch_jobs integer NOT NULL DEFAULT 1000
        CONSTRAINT enqueue_limits_max_batch_jobs_check CHECK (max_batch_jobs >= 1),
    ADD COLUMN max_batch_dependencies integer NOT NULL DEFAULT 10000
        CONSTRAINT enqueue_limits_max_batch_dependencies_check CHECK (max_batch_dependencies >= 1);

-- The child's depth: 1 + the deepest of its parents' (a job without parents is at 0).
-- Every edge of a child holds the same value.
ALTER TABLE jobq.job_dependencies ADD COLUMN depth integer NOT NULL DEFAULT 1;

-- enqueue_limits_for returns the whole row: its column list grew.
DROP FUNCTION jobq.enqueue_limits_for(text);
CREATE FUNCTION jobq.enqueue_limits_for(queue text)
RETURNS jobq.enqueue_limits
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


-- ---- what a parent's end does to its dependents, level by level ----------------------

DROP FUNCTION jobq.settle_dependents(bigint, text);
DROP FUNCTION jobq.revive_dependents(bigint);

-- Jobs `parents` ended as `states` ('succeeded', 'failed', 'cancelled', 'deleted'): resolve
-- the edges each satisfies (it succeeded, or the child runs anyway) and queue each child
-- whose last edge that was; cancel the waiting children the others fail; then do the
-- same for the children cancelled, and so on down. One level is one set of statements,
-- so a chain of any length nests no call (the children changed here do not run the
-- trigger's cascade again: see after_job_state_change). `only_child`: settle that
-- child's edges only (the first level; the check at commit of a new child).
CREATE FUNCTION jobq.settle_dependents(parents bigint[], states text[],
                                       only_child bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
-- One plan for every call: a plan made for each call's arrays cost every finish more
-- than the statements' work (the plans walk the indexes whatever the arrays hold).
SET plan_cache_mode = force_generic_plan
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

-- The `last_error` of a child cancelled because `parent` ended as `parent_state`.
CREATE FUNCTION jobq.parent_failed(parent bigint, parent_state text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE
AS $$
    SELECT jsonb_build_object(
        'type', 'parent_failed',
        'message', format('parent job %s %s', parent,
                          CASE WHEN parent_state = 'deleted' THEN 'was deleted'
                               ELSE 'ended ' || parent_state END),
        'details', jsonb_build_object('parent_id', parent, 'parent_state', parent_state))
$$;

-- A parent that had failed or been cancelled was sent back to the queue: the dependents
-- its failure cancelled wait again, and theirs, level by level. A dependent that another
-- parent still fails (failed, cancelled, or deleted: an edge gone that its count still
-- holds) stays cancelled, and from now on names that parent.
CREATE FUNCTION jobq.revive_dependents(parent bigint)
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
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

-- Why a failed or cancelled child cannot be retried: a parent it still waits for ended
-- for good (failed or cancelled) or is gone. NULL: nothing stands in its way.
CREATE FUNCTION jobq.blocking_parent(child bigint)
RETURNS text
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

-- A job's state changed. Its own dependents are settled (or revived) here, the whole
-- cascade below it included; the children that cascade changes come back here one
-- trigger level down, where only their watchers are told (pg_trigger_depth() > 1), so
-- no chain nests calls.
CREATE OR REPLACE FUNCTION jobq.after_job_state_change()
RETURNS trigger
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

-- A deleted job's waiting dependents are cancelled, whatever state it was in (a failed
-- parent's retried child waits for it too); a child an earlier failure cancelled names
-- it from now on (retrying that other parent cannot bring back a child whose edge to
-- this one is gone). Its edges go with it.
CREATE OR REPLACE FUNCTION jobq.after_job_delete()
RETURNS trigger
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

-- At the commit of a transaction that made a child (once per child: its first edge
-- does it), its parents still to settle it are locked for that moment and marked
-- (a parent's finish from now on waits for the commit, then sees the child's edges), and
-- the ones that ended since the child was enqueued, or went, are settled for it. Nothing
-- is locked from the enqueue to the commit, however long the producer's transaction.
CREATE FUNCTION jobq.check_new_dependencies()
RETURNS trigger
LANGUAGE plpgsql
-- It runs at the commit of the producer's transaction, outside jobq.enqueue: as the
-- schema's owner, like the function that made the edges (jobq_producer reads no table).
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

CREATE CONSTRAINT TRIGGER job_dependencies_checked_at_commit
    AFTER INSERT ON jobq.job_dependencies
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    EXECUTE FUNCTION jobq.check_new_dependencies();


-- ---- the SQL enqueue, bounded and limited to the parents the caller may read -------------

DROP FUNCTION jobq.enqueue_many(text, jsonb);
DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
                           integer, integer, text, jsonb, bigint[], text, text);

-- Enqueue one job, as `POST /v1/queues/{queue}/jobs` does: the same defaults, limits,
-- idempotency and wake-up, and the job exists if and only if the caller's transaction
-- commits. Refusals raise SQLSTATE JQ422 (invalid: the field is the DETAIL), JQ413 (too
-- large) or JQ429 (the queue is full). `depends_on` names the jobs it waits for; with
-- `parent_queues` (names) and `parent_queue_patterns` (LIKE patterns), only jobs of
-- those queues (the HTTP caller's key's), any other answered as no job at all.
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
    name_pattern CONSTANT text := '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';
    parents bigint[] := ARRAY(SELECT DISTINCT unnest(coalesce(depends_on, '{}')));
    found_parents bigint[];
    found_states text[];
    pending integer := 0;
    failed_parent bigint;
    failed_state text;
    new_depth integer := 0;
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
    IF cardinality(parents) > limits.max_batch_dependencies THEN
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

    -- The parents as they are now, read without a lock and left unwritten: the check
    -- at commit (check_new_dependencies) settles whatever changes before it. A parent in
    -- a queue the caller may not read is no job at all.
    IF cardinality(parents) > 0 THEN
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
            CASE WHEN new_state = 'cancelled'
                 THEN jobq.parent_failed(failed_parent, failed_state) END,
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
        -- as the parents were read above (the count is of that read too)
        INSERT INTO jobq.job_dependencies (child_id, parent_id, resolved, depth)
        SELECT new_id, f.id,
               f.state = 'succeeded'
               OR (on_parent_failure = 'run' AND f.state IN ('failed', 'cancelled')),
               new_depth
          FROM unnest(found_parents, found_states) AS f(id, state);
    END IF;
    IF new_state = 'queued' THEN
        PERFORM jobq.announce_due(enqueue.queue, due, 1);
    END IF;
    RETURN QUERY SELECT new_id, new_state, false;
END
$$;

-- Enqueue a batch into one queue, as `POST /v1/queues/{queue}/jobs/batch` does: `jobs`
-- is its JSON array; an item's `depends_on` may name earlier items as {"ref": index}.
-- All or nothing: admission control counts the whole batch first. At most
-- max_batch_jobs items, and max_batch_dependencies `depends_on` entries in all.
-- `parent_queues`, `parent_queue_patterns`: as for jobq.enqueue.
CREATE FUNCTION jobq.enqueue_many(queue text, jobs jsonb,
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
    new_jobs integer;
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

-- Producers that share the database enqueue through the two functions, and nothing
-- else: the schema's other functions are for the roles that use its tables (the
-- service's), not for PUBLIC.
DO $$
DECLARE
    grantee text;
BEGIN
    REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA jobq FROM PUBLIC;
    FOR grantee IN
        SELECT DISTINCT g.grantee::text FROM information_schema.role_table_grants g
         WHERE g.table_schema = 'jobq' AND g.table_name = 'jobs' AND g.grantee <> 'PUBLIC'
           AND g.grantee::text <> current_user
    LOOP
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobq TO %I', grantee);
    END LOOP;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text, text[],
            text[]) TO jobq_producer;
        GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb, text[], text[]) TO jobq_producer;
    END IF;
END
$$;
