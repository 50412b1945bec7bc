-- Migration 0010: job dependencies, waiting for a result, enqueueing from SQL.
-- (See 0010_dependencies.py for what each part is for.)

ALTER TABLE jobq.jobs
    -- parents not yet satisfied; the job is `waiting` while this is above 0
    ADD COLUMN waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN has_parents boolean NOT NULL DEFAULT false,
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,
    -- run once the parents finished, whether they succeeded or not
    ADD COLUMN run_on_parent_failure boolean NOT NULL DEFAULT false,
    -- someone waits for this job's result: NOTIFY jobq_finished when it finishes
    ADD COLUMN notify_finish boolean NOT NULL DEFAULT false;

-- Counts the waiting jobs of a queue for the statistics, and nothing else.
CREATE INDEX jobs_waiting_idx ON jobq.jobs (queue) WHERE state = 'waiting';

CREATE TABLE jobq.job_dependencies (
    child_id   bigint NOT NULL,
    parent_id  bigint NOT NULL,
    -- the parent finished in a way that lets the child run (it is no longer counted)
    resolved   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (child_id, parent_id)
);
-- A parent's finish finds its children through this; no finish scans the jobs.
CREATE INDEX job_dependencies_parent_idx ON jobq.job_dependencies (parent_id);

-- The statistics count waiting jobs too (through jobs_waiting_idx).
CREATE OR REPLACE VIEW jobq.live_jobs AS
SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
  FROM jobq.jobs
 WHERE state = 'queued'
UNION ALL
SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
  FROM jobq.jobs
 WHERE state = 'running'
UNION ALL
SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
  FROM jobq.jobs
 WHERE state = 'waiting';


-- ---- what a parent's end does to its dependents ------------------------------------

-- A parent ended as `parent_state`: resolve the edges it satisfies (it succeeded, or the
-- child runs anyway) and queue each child whose last edge that was; cancel the waiting
-- children it fails (their own dependents follow, through the trigger).
CREATE FUNCTION jobq.settle_dependents(parent bigint, parent_state text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    announcements integer;
BEGIN
    WITH satisfied AS (
        UPDATE jobq.job_dependencies d
           SET resolved = true
          FROM jobq.jobs c
         WHERE d.parent_id = parent AND NOT d.resolved AND c.id = d.child_id
           AND (parent_state = 'succeeded' OR c.run_on_parent_failure)
        RETURNING d.child_id
    ),
    released AS (
        UPDATE jobq.jobs c
           SET waiting_for = c.waiting_for - 1,
               state = CASE WHEN c.state = 'waiting' AND c.waiting_for = 1
                            THEN 'queued' ELSE c.state END,
               updated_at = now()
          FROM satisfied s
         WHERE c.id = s.child_id
        RETURNING c.queue, c.state, c.run_at
    ),
    announced AS MATERIALIZED (
        SELECT jobq.announce_due(queue, min(run_at), count(*))
          FROM released
         WHERE state = 'queued'
         GROUP BY queue
    )
    SELECT count(*) INTO announcements FROM announced;

    IF parent_state <> 'succeeded' THEN
        UPDATE jobq.jobs c
           SET state = 'cancelled',
               finished_at = now(),
               updated_at = now(),
               last_error = jsonb_build_object(
                   'type', 'parent_failed',
                   'message', format('parent job %s %s', parent,
                       CASE WHEN parent_state = 'deleted' THEN 'was deleted'
                            ELSE 'ended ' || parent_state END),
                   'details', jsonb_build_object('parent_id', parent,
                                                 'parent_state', parent_state))
          FROM jobq.job_dependencies d
         WHERE d.parent_id = parent AND NOT d.resolved AND c.id = d.child_id
           AND c.state = 'waiting' AND NOT c.run_on_parent_failure;
    END IF;
END
$$;

-- A parent that had failed or been cancelled was sent back to the queue: the dependents
-- its failure cancelled wait again (and theirs, through the trigger).
CREATE FUNCTION jobq.revive_dependents(parent bigint)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE jobq.jobs c
       SET state = CASE WHEN c.waiting_for > 0 THEN 'waiting' ELSE 'queued' END::jobq.job_state,
           finished_at = NULL,
           last_error = NULL,
           updated_at = now()
      FROM jobq.job_dependencies d
     WHERE d.parent_id = parent AND c.id = d.child_id AND c.state = 'cancelled'
       AND c.last_error->>'type' = 'parent_failed'
       AND (c.last_error->'details'->>'parent_id')::bigint = parent;
END
$$;

CREATE FUNCTION jobq.after_job_state_change()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.notify_finish AND NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        PERFORM pg_notify('jobq_finished', NEW.id::text);
    END IF;
    IF NEW.has_dependents THEN
        IF NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
            PERFORM jobq.settle_dependents(NEW.id, NEW.state::text);
        ELSIF OLD.state IN ('failed', 'cancelled') THEN
            PERFORM jobq.revive_dependents(NEW.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_settle_dependents
    AFTER UPDATE OF state ON jobq.jobs
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state AND (NEW.has_dependents OR NEW.notify_finish)
          AND (NEW.state IN ('succeeded', 'failed', 'cancelled')
               OR OLD.state IN ('failed', 'cancelled')))
    EXECUTE FUNCTION jobq.after_job_state_change();

-- A job deleted before it succeeded (an operator's delete or purge) fails its
-- dependents as a cancelled one would; a deleted job's edges go with it.
CREATE FUNCTION jobq.after_job_delete()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF OLD.has_dependents THEN
        IF OLD.state NOT IN ('succeeded', 'failed', 'cancelled') THEN
            PERFORM jobq.settle_dependents(OLD.id, 'deleted');
        END IF;
        DELETE FROM jobq.job_dependencies WHERE parent_id = OLD.id;
    END IF;
    IF OLD.has_parents THEN
        DELETE FROM jobq.job_dependencies WHERE child_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_forget_dependencies
    AFTER DELETE ON jobq.jobs
    FOR EACH ROW
    WHEN (OLD.has_parents OR OLD.has_dependents)
    EXECUTE FUNCTION jobq.after_job_delete();
