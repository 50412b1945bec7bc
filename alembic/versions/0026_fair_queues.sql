-- Migration 0026: fair queues. (See 0026_fair_queues.py for what each part is for.)

ALTER TABLE jobq.jobs ADD COLUMN fairness_key text;

ALTER TABLE jobq.queues
    ADD COLUMN ordering text NOT NULL DEFAULT 'fifo' CHECK (ordering IN ('fifo', 'fair')),
    ADD COLUMN fair_weights jsonb CHECK (jsonb_typeof(fair_weights) = 'object'),
    ADD COLUMN rate_limit_per_key_jobs integer CHECK (rate_limit_per_key_jobs >= 1),
    ADD COLUMN rate_limit_per_key_seconds double precision
        CHECK (rate_limit_per_key_seconds > 0),
    ADD COLUMN aging_seconds double precision CHECK (aging_seconds > 0),
    ADD COLUMN aging_max integer CHECK (aging_max >= 1),
    ADD CONSTRAINT rate_limit_per_key_whole
        CHECK ((rate_limit_per_key_jobs IS NULL) = (rate_limit_per_key_seconds IS NULL)),
    ADD CONSTRAINT aging_whole CHECK ((aging_seconds IS NULL) = (aging_max IS NULL)),
    -- what only the fair claim enforces needs a fair queue; the fair claim leaves
    -- concurrency keys' limits to the fifo one
    ADD CONSTRAINT fair_limits_need_fair_ordering
        CHECK (ordering = 'fair'
               OR (rate_limit_per_key_jobs IS NULL AND aging_seconds IS NULL)),
    ADD CONSTRAINT fair_ordering_without_max_running_per_key
        CHECK (ordering = 'fifo' OR max_running_per_key IS NULL);

-- A fair queue is leased like a limited one: one lease at a time, under its row's lock.
ALTER TABLE jobq.queues DROP COLUMN limited;
ALTER TABLE jobq.queues
    ADD COLUMN limited boolean GENERATED ALWAYS AS (
        max_running IS NOT NULL OR max_running_per_key IS NOT NULL
        OR rate_limit_jobs IS NOT NULL OR ordering = 'fair') STORED;

-- The fair claim walks a fair queue's keys by pass, then each key's best due jobs.
CREATE TABLE jobq.fair_keys (
    queue text NOT NULL,
    key   text NOT NULL,
    pass  double precision NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE INDEX fair_keys_pass_idx ON jobq.fair_keys (queue, pass, key);

CREATE INDEX jobs_fair_claim_idx
    ON jobq.jobs (queue, fairness_key, priority DESC, run_at, id)
 WHERE state = 'queued' AND fairness_key IS NOT NULL;

CREATE TABLE jobq.fair_key_rate_log (
    queue text NOT NULL,
    key   text NOT NULL,
    at    timestamptz NOT NULL,
    jobs  integer NOT NULL CHECK (jobs >= 1)
);
CREATE INDEX fair_key_rate_log_idx ON jobq.fair_key_rate_log (queue, key, at);
CREATE INDEX fair_key_rate_log_at_idx ON jobq.fair_key_rate_log (queue, at);

-- A job queued with a fairness key in a fair queue: its key gets a row if it has none,
-- its pass the lowest of the queue's keys (a key back from idle takes its turn among
-- the others, with no credit saved up). The shared advisory lock on (queue, key), held
-- to commit, keeps jobq.forget_fair_key from dropping the row this job needs before
-- the job is visible.
CREATE FUNCTION jobq.fair_key_queued()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

CREATE TRIGGER jobs_fair_key_inserted
    AFTER INSERT ON jobq.jobs
    FOR EACH ROW WHEN (NEW.state = 'queued' AND NEW.fairness_key IS NOT NULL)
    EXECUTE FUNCTION jobq.fair_key_queued();
CREATE TRIGGER jobs_fair_key_requeued
    AFTER UPDATE OF state ON jobq.jobs
    FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued'
                       AND NEW.fairness_key IS NOT NULL)
    EXECUTE FUNCTION jobq.fair_key_queued();

-- Drop a fair queue's key row once no job of the key is queued: what the fair claim
-- calls for a key it found idle, so idle keys cost it nothing after once. Only when no
-- transaction is queueing a job of the key (their shared lock), and as seen by a
-- snapshot taken after that lock (a VOLATILE function's own statement): a job
-- committed since the claim began keeps its row. Whether the row went.
CREATE FUNCTION jobq.forget_fair_key(queue text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext(forget_fair_key.queue),
                                     hashtext(forget_fair_key.key)) THEN
        RETURN false;
    END IF;
    DELETE FROM jobq.fair_keys k
     WHERE k.queue = forget_fair_key.queue AND k.key = forget_fair_key.key
       AND NOT EXISTS (SELECT FROM jobq.jobs j
                        WHERE j.queue = k.queue AND j.fairness_key = k.key
                          AND j.state = 'queued');
    RETURN FOUND;
END
$$;

-- After a queue's ordering was set (in the same transaction): a fair queue's queued jobs
-- without a fairness key take the key '' (as jobq.insert_jobs gives them), and each key
-- with queued jobs gets its row; a fifo queue's rows go. jobq.jobs is locked against
-- writes first (SHARE: the enqueues under way finish, new ones wait for this commit), so
-- no job enqueued as the ordering changed is left without its key's row. How many jobs
-- took the key '', keys were added, rows dropped.
CREATE FUNCTION jobq.sync_fair_keys(queue text)
RETURNS TABLE (keyless bigint, added bigint, dropped bigint)
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

-- A fairness key as the API's schema takes it: SQLSTATE JQ422, `field` the DETAIL.
CREATE FUNCTION jobq.check_fairness_key(fairness_key text, field text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF fairness_key IS NOT NULL AND length(fairness_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'fairness_key must be 1 to 255 characters'
            USING ERRCODE = 'JQ422', DETAIL = field;
    END IF;
END
$$;

-- The one enqueue takes each job's fairness key (0023's, with `fairness_keys`); a job
-- without one in a fair queue has the key '' (the queue's keyless jobs take one turn).
DROP FUNCTION jobq.insert_jobs(text, text[], jsonb[], integer[], timestamptz[],
    double precision[], integer[], integer[], text[], jsonb[], text[], integer, integer,
    integer[], boolean[], jsonb[]);
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
    fairness_keys text[] DEFAULT NULL
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
                                    run_on_parent_failure, finished_at, last_error,
                                    fairness_key)
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
                    ELSE fairness_keys[1] END
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
                      parent_failures, fairness_keys)
               WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                    lease_seconds, idempotency_key, metadata,
                                    concurrency_key, waiting_for, run_on_parent_failure,
                                    parent_failure, fairness_key, ord)
    ),
    policy AS MATERIALIZED (
        -- the queue's own defaults, where its settings have them
        SELECT q.max_attempts, q.lease_seconds, q.ordering
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
                                    fairness_key)
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
                    ELSE i.fairness_key END
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

DROP FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz, double precision,
    integer, integer, text, jsonb, bigint[], text, text, text[], text[]);
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
    fairness_key text DEFAULT NULL
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
    PERFORM jobq.check_fairness_key(fairness_key, 'fairness_key');

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
                                                                     failed_state) END],
               fairness_keys => ARRAY[fairness_key]
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
            position := position + 1;
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
                                     ORDER BY i.n) AS runs_on_parent_failure,
                           array_agg(i.job->>'fairness_key' ORDER BY i.n) AS fairness_keys
                      FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, n)) AS a
             CROSS JOIN LATERAL jobq.insert_jobs(
                       enqueue_many.queue, a.types, a.payloads, a.priorities, a.run_ats,
                       a.delays, a.max_attempts, a.lease_seconds, a.keys, a.metadatas,
                       a.concurrency_keys, limits.default_max_attempts,
                       limits.default_lease_seconds,
                       runs_on_parent_failure => a.runs_on_parent_failure,
                       fairness_keys => a.fairness_keys) AS f
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
            fairness_key => item->>'fairness_key',
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
-- else; the service's roles (those granted the jobs table) use all the schema's
-- functions and the new tables. (As 0021 did: functions made since are PUBLIC's by
-- default, 0025's among them.)
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
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON jobq.fair_keys, '
                       'jobq.fair_key_rate_log TO %I', grantee);
    END LOOP;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobq_producer') THEN
        GRANT EXECUTE ON FUNCTION jobq.enqueue(text, text, jsonb, integer, timestamptz,
            double precision, integer, integer, text, jsonb, bigint[], text, text, text[],
            text[], text) TO jobq_producer;
        GRANT EXECUTE ON FUNCTION jobq.enqueue_many(text, jsonb, text[], text[])
            TO jobq_producer;
    END IF;
END
$$;
