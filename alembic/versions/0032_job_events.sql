-- Migration 0032: the job-event outbox (jobq.job_events), written by triggers of its own
-- in the transaction of each change, and stamped with a commit order by jobq.stamp_events.

CREATE TYPE jobq.event_kind AS ENUM (
    'enqueued', 'started', 'succeeded', 'failed', 'retrying', 'cancelled',
    'queue_paused', 'queue_resumed', 'queue_settings'
);

-- `id` is the order of writing (a sequence: visible out of commit order); `position` the
-- order of commit, set by jobq.stamp_events after the writer committed (NULL until then).
-- Positions are gapless, so a reader that resumes after one knows whether it missed any.
CREATE TABLE jobq.job_events (
    id bigint GENERATED ALWAYS AS IDENTITY,
    position bigint,
    at timestamptz NOT NULL DEFAULT now(),
    kind jobq.event_kind NOT NULL,
    queue text NOT NULL,
    job_id bigint,
    type text,
    attempt integer
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
        autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0);

CREATE UNIQUE INDEX job_events_position ON jobq.job_events (position) WHERE position IS NOT NULL;

-- what the stamper reads: the events not stamped yet, in the order they were written
CREATE INDEX job_events_unstamped ON jobq.job_events (id) WHERE position IS NULL;

COMMENT ON TABLE jobq.job_events IS
    'Job and queue events, written in the transaction of the change; read in position order.';

-- One INSERT per statement, from the statement's transition table.
CREATE FUNCTION jobq.record_jobs_enqueued() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO jobq.job_events (kind, queue, job_id, type, attempt)
    SELECT 'enqueued', queue, id, type, attempt FROM new_jobs ORDER BY id;
    RETURN NULL;
END
$$;

-- An update that changed a job's state records what it became; `waiting` to `queued`
-- (its parents done) is no event of its own: the job was announced when enqueued.
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

CREATE TRIGGER jobs_record_enqueued AFTER INSERT ON jobq.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_jobs_enqueued();

CREATE TRIGGER jobs_record_changes AFTER UPDATE ON jobq.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_jobs_changed();

-- A queue's settings, without what pausing changes and the bookkeeping.
CREATE FUNCTION jobq.queue_settings_of(queue jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
        SELECT queue - ARRAY['name', 'paused', 'paused_at', 'created_at', 'updated_at', 'limited']
    $$;

-- Pausing, resuming and settings: a queue's row is made by the first of them (INSERT …
-- ON CONFLICT DO UPDATE), so both its inserts and its updates record events.
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

CREATE TRIGGER queues_record_created AFTER INSERT ON jobq.queues
    REFERENCING NEW TABLE AS new_queues
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_queues_changed();

CREATE TRIGGER queues_record_changes AFTER UPDATE ON jobq.queues
    REFERENCING OLD TABLE AS old_queues NEW TABLE AS new_queues
    FOR EACH STATEMENT EXECUTE FUNCTION jobq.record_queues_changed();

-- Give up to `batch_size` committed events the next positions, in the order they were
-- written; NULL when another session is stamping. One stamper at a time (the lock), and
-- each statement here sees what the stamper before committed, so positions are gapless
-- and become visible in order. An event committed later than another of its job was
-- written later (its transaction waited for the other's row lock), so each job's events
-- are stamped in the order they happened. Announces the last position on `jobq_events`.
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

REVOKE ALL ON FUNCTION jobq.record_jobs_enqueued() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobq.record_jobs_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobq.record_queues_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobq.queue_settings_of(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobq.stamp_events(integer) FROM PUBLIC;
