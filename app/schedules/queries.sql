-- Cron schedules (jobq.schedules) and the jobs their ticks made (jobq.schedule_runs).
-- A tick's job is enqueued through jobq.enqueue (migration 0010), with the idempotency
-- key `schedule:<name>:<tick>` (a prefix clients may not use over HTTP).


-- name: put_schedule
-- Create or replace a schedule; its next tick is the one given (computed from now).
INSERT INTO jobq.schedules AS s (name, queue, type, payload, cron, timezone, priority,
                                 max_attempts, lease_seconds, metadata, paused, catch_up,
                                 catch_up_limit, next_tick)
VALUES (:name, :queue, :type, CAST(:payload AS jsonb), :cron, :timezone, :priority,
        :max_attempts, :lease_seconds, CAST(:metadata AS jsonb), :paused, :catch_up,
        :catch_up_limit, :next_tick)
ON CONFLICT (name) DO UPDATE
   SET queue = excluded.queue, type = excluded.type, payload = excluded.payload,
       cron = excluded.cron, timezone = excluded.timezone, priority = excluded.priority,
       max_attempts = excluded.max_attempts, lease_seconds = excluded.lease_seconds,
       metadata = excluded.metadata, paused = excluded.paused,
       catch_up = excluded.catch_up, catch_up_limit = excluded.catch_up_limit,
       next_tick = excluded.next_tick, updated_at = now()
RETURNING (xmax = 0) AS created, s.*;


-- name: get_schedule
-- One schedule by name.
SELECT * FROM jobq.schedules WHERE name = :name;


-- name: list_schedules
-- A page of schedules by name after a given one, limited to the queues an API key may
-- read (names, and LIKE patterns; NULL names: every queue).
SELECT *
  FROM jobq.schedules
 WHERE name > :after
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR queue = ANY(CAST(:allowed_names AS text[]))
        OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
 ORDER BY name
 LIMIT :limit;


-- name: delete_schedule
-- Delete a schedule and the record of its runs (the jobs it made stay).
WITH gone AS (
    DELETE FROM jobq.schedules WHERE name = :name RETURNING name
),
runs AS (
    DELETE FROM jobq.schedule_runs r USING gone WHERE r.schedule = gone.name
)
SELECT name FROM gone;


-- name: pause_schedule
-- Pause or resume a schedule; resuming starts from the next tick after now.
UPDATE jobq.schedules
   SET paused = :paused,
       next_tick = CASE WHEN :paused THEN next_tick ELSE :next_tick END,
       updated_at = now()
 WHERE name = :name
RETURNING *;


-- name: recent_runs
-- The last ticks of the given schedules and the state of the job each made, newest first.
SELECT r.schedule, r.tick, r.job_id, j.state, r.refused
  FROM (SELECT *, row_number() OVER (PARTITION BY schedule ORDER BY tick DESC) AS n
          FROM jobq.schedule_runs
         WHERE schedule = ANY(CAST(:names AS text[]))) r
  LEFT JOIN jobq.jobs j ON j.id = r.job_id
 WHERE r.n <= :per_schedule
 ORDER BY r.schedule, r.tick DESC;


-- name: due_schedules
-- The schedules whose next tick has come, locked for this scheduler pass.
SELECT *, now() AS now
  FROM jobq.schedules
 WHERE NOT paused AND next_tick <= now()
 ORDER BY next_tick
 LIMIT :limit
   FOR UPDATE SKIP LOCKED;


-- name: enqueue_tick
-- Enqueue one tick's job (its idempotency key makes a tick's job one job, ever; NULL:
-- the key was taken by a job the scheduler did not make, so this one goes without).
SELECT id, deduplicated
  FROM jobq.enqueue(queue => :queue, type => :type, payload => CAST(:payload AS jsonb),
                    priority => :priority, max_attempts => :max_attempts,
                    lease_seconds => :lease_seconds, idempotency_key => :idempotency_key,
                    metadata => CAST(:metadata AS jsonb));


-- name: record_run
-- Record a tick's job (or why there is none), keeping the schedule's last 100 runs.
WITH recorded AS (
    INSERT INTO jobq.schedule_runs (schedule, tick, job_id, refused)
    VALUES (:schedule, :tick, :job_id, :refused)
    ON CONFLICT (schedule, tick) DO NOTHING
    RETURNING schedule
)
DELETE FROM jobq.schedule_runs r
 WHERE r.schedule = :schedule
   AND r.tick < (SELECT tick FROM jobq.schedule_runs
                  WHERE schedule = :schedule ORDER BY tick DESC OFFSET 99 LIMIT 1);


-- name: advance_schedule
-- After a pass: the last tick enqueued (if any) and the next one to come.
UPDATE jobq.schedules
   SET last_tick = coalesce(CAST(:last_tick AS timestamptz), last_tick),
       next_tick = :next_tick,
       updated_at = now()
 WHERE name = :name;
