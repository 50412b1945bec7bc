-- Heartbeat and finish: every transition on a lease checks `lease_id` and
-- `state = 'running'` in the `WHERE` of the same `UPDATE`, so a stale worker matches
-- nothing; nor does one whose attempt ran past the job's `timeout_seconds`. Batches
-- travel as arrays and are unpacked with `unnest`. A statement that makes jobs `queued`
-- again announces them (jobq.announce_due); the NOTIFY is delivered on commit.
-- `:key_id` is the caller's API key (NULL: authentication is off); a lease taken with
-- no key (push delivery's, or while authentication was off) is its lease id's holder's.


-- name: heartbeat
-- Extend a live lease (of this key) and record progress, writing at most once per interval.
-- No lease ends past its attempt's timeout, and one past it is not extended.
WITH held AS (
    SELECT id, lease_expires_at, cancel_requested,
           -- Write the row only when something worth writing changed: the lease's
           -- length; its end, by more than the minimum interval (or a tenth of the
           -- lease, if less); or progress last stored that interval ago or more.
           -- So a runaway worker writes its job's row once per interval.
           coalesce(:extend_seconds, current_lease_seconds) <> current_lease_seconds
           OR least(now() + make_interval(secs => current_lease_seconds),
                    attempted_at + make_interval(secs => timeout_seconds)) NOT BETWEEN
              lease_expires_at
              AND lease_expires_at + make_interval(secs => least(
                  CAST(:min_interval AS double precision), current_lease_seconds / 10.0))
           OR (:has_progress AND (progress_updated_at IS NULL OR progress_updated_at
               <= now() - make_interval(secs => CAST(:min_interval AS double precision))))
           AS needs_write
      FROM jobq.jobs
     -- `state::text`: a state test the partial index of running jobs cannot serve, so
     -- that no cached plan walks every running job to find this one (as in finish_one)
     WHERE id = :job_id AND lease_id = :lease_id AND state::text = 'running'
       AND (CAST(:key_id AS bigint) IS NULL OR lease_key_id IS NULL
            OR lease_key_id = CAST(:key_id AS bigint))
       AND (timeout_seconds IS NULL
            OR now() < attempted_at + make_interval(secs => timeout_seconds))
),
written AS (
    UPDATE jobq.jobs j
       SET current_lease_seconds = coalesce(:extend_seconds, j.current_lease_seconds),
           lease_expires_at = least(
               now() + make_interval(secs => coalesce(:extend_seconds, j.current_lease_seconds)),
               j.attempted_at + make_interval(secs => j.timeout_seconds)),
           progress_percent = CASE WHEN :has_progress THEN :percent ELSE j.progress_percent END,
           progress_stage = CASE WHEN :has_progress THEN :stage ELSE j.progress_stage END,
           progress_message = CASE WHEN :has_progress THEN :message ELSE j.progress_message END,
           progress_updated_at = CASE WHEN :has_progress THEN now()
                                      ELSE j.progress_updated_at END,
           updated_at = now()
      FROM held
     WHERE held.needs_write  -- decided on this statement's snapshot
       AND j.id = held.id AND j.lease_id = :lease_id AND j.state::text = 'running'
    RETURNING j.lease_expires_at, j.cancel_requested
)
SELECT true AS written, lease_expires_at, cancel_requested FROM written
UNION ALL
SELECT false, lease_expires_at, cancel_requested FROM held WHERE NOT held.needs_write;


-- name: finish_one
-- Complete or fail one live lease held by this key, returning the whole job; no row
-- when the lease is stale, unknown or another key's. The same UPDATE as finish_many,
-- its input as scalars in the statement itself: no CTE around it, which every
-- execution would set up afresh with the whole row passing through (455k of
-- PostgreSQL's instructions a call, now 378k: bench.pg_calls), and a plan PostgreSQL
-- keeps (generic) instead of planning each call afresh.
UPDATE jobq.jobs j
   SET state = CASE WHEN :outcome = 'complete' THEN 'succeeded'
                    WHEN :retryable AND j.attempt < j.max_attempts
                         AND NOT j.cancel_requested THEN 'queued'
                    WHEN j.cancel_requested THEN 'cancelled'
                    ELSE 'failed' END::jobq.job_state,
       run_at = CASE WHEN :outcome = 'fail' AND :retryable
                          AND j.attempt < j.max_attempts AND NOT j.cancel_requested
           THEN jobq.queue_retry_at(j.queue, j.attempt, :retry_after,
                                    :backoff_base, :backoff_cap, :backoff_jitter)
           ELSE j.run_at END,
       finished_at = CASE WHEN :outcome = 'fail' AND :retryable
                               AND j.attempt < j.max_attempts AND NOT j.cancel_requested
           THEN NULL ELSE now() END,
       last_error = CASE WHEN :outcome = 'fail' THEN CAST(:error AS jsonb)
                         ELSE j.last_error END,
       result = CASE WHEN :outcome = 'complete' THEN CAST(:result AS jsonb) ELSE j.result END,
       lease_expires_at = NULL,
       worker_id = CASE WHEN :outcome = 'complete' THEN j.worker_id END,
       attempts = CASE WHEN :outcome = 'complete' THEN j.attempts
           ELSE j.attempts || jobq.attempt_record(j.attempt, j.lease_id, j.worker_id,
                                                  j.lease_key_id, j.attempted_at,
                                                  'failed', CAST(:error AS jsonb)) END,
       updated_at = now()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id IS NULL
        OR j.lease_key_id = CAST(:key_id AS bigint))
   AND (j.timeout_seconds IS NULL
        OR now() < j.attempted_at + make_interval(secs => j.timeout_seconds))
-- a job queued again (a retry) is announced
RETURNING j.*,
          CASE WHEN j.state = 'queued' THEN jobq.announce_due(j.queue, j.run_at, 1) END
              AS announced;


-- name: finish_many
-- Complete or fail a batch of live leases held by this key; a stale, unknown or other
-- key's lease matches no row. Each finished job comes back in brief: what the batch's
-- answer and the metrics need, not the payload, result and history.
WITH input AS (
    SELECT *
      FROM unnest(CAST(:job_ids AS bigint[]), CAST(:lease_ids AS uuid[]),
                  CAST(:outcomes AS text[]), CAST(:results AS jsonb[]),
                  CAST(:errors AS jsonb[]), CAST(:retryable AS boolean[]),
                  CAST(:retry_after AS double precision[]))
           WITH ORDINALITY AS i(job_id, lease_id, outcome, result, error, retryable,
                                retry_after, ord)
),
finished AS (
    -- One UPDATE, each ack finding its job by primary key with the lease checked in the
    -- WHERE; when a heartbeat, a cancel or the reaper changed the row meanwhile,
    -- PostgreSQL checks the WHERE again on the newest version, and the SET reads that
    -- version's attempt and cancel flag (no row lock taken beforehand).
    -- - `state::text`: a state test the partial index of running jobs cannot serve, so
    --   that no cached generic plan walks every running job instead of the primary key.
    -- - A fail is tried again while attempts remain, unless its cancellation was asked
    --   for (the same test thrice: a SET cannot read another's new value).
    -- - A succeeded job's last attempt is recorded by its own columns (lease_id,
    --   worker_id, attempted_at, finished_at: jobq.attempts_of), not appended to
    --   `attempts`: a complete writes no history.
    UPDATE jobq.jobs j
       SET state = CASE WHEN i.outcome = 'complete' THEN 'succeeded'
                        WHEN i.retryable AND j.attempt < j.max_attempts
                             AND NOT j.cancel_requested THEN 'queued'
                        WHEN j.cancel_requested THEN 'cancelled'
                        ELSE 'failed' END::jobq.job_state,
           run_at = CASE WHEN i.outcome = 'fail' AND i.retryable
                              AND j.attempt < j.max_attempts AND NOT j.cancel_requested
               THEN jobq.queue_retry_at(j.queue, j.attempt, i.retry_after,
                                        :backoff_base, :backoff_cap, :backoff_jitter)
               ELSE j.run_at END,
           finished_at = CASE WHEN i.outcome = 'fail' AND i.retryable
                                   AND j.attempt < j.max_attempts AND NOT j.cancel_requested
               THEN NULL ELSE now() END,
           last_error = CASE WHEN i.outcome = 'fail' THEN i.error ELSE j.last_error END,
           result = CASE WHEN i.outcome = 'complete' THEN i.result ELSE j.result END,
           lease_expires_at = NULL,
           worker_id = CASE WHEN i.outcome = 'complete' THEN j.worker_id END,
           attempts = CASE WHEN i.outcome = 'complete' THEN j.attempts
               ELSE j.attempts || jobq.attempt_record(j.attempt, j.lease_id, j.worker_id,
                                                      j.lease_key_id, j.attempted_at,
                                                      'failed', i.error) END,
           updated_at = now()
      FROM input i
     WHERE j.id = i.job_id AND j.lease_id = i.lease_id AND j.state::text = 'running'
       AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id IS NULL
            OR j.lease_key_id = CAST(:key_id AS bigint))
       AND (j.timeout_seconds IS NULL
            OR now() < j.attempted_at + make_interval(secs => j.timeout_seconds))
    RETURNING i.ord, j.id, j.queue, j.state, j.attempt, j.attempted_at, j.updated_at,
              j.run_at, j.last_error, j.traceparent, j.tracestate
),
announced AS MATERIALIZED (
    SELECT jobq.announce_due(queue, min(run_at), count(*))
      FROM finished
     WHERE state = 'queued'
     GROUP BY queue
)
SELECT ord, id, queue, state, attempt, attempted_at, updated_at, last_error, traceparent,
       tracestate
  FROM finished CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: complete_one
-- Complete one live lease held by this key, returning the whole job; no row when the
-- lease is stale, unknown or another key's. What finish_one does for a complete, alone:
-- none of a fail's expressions, which each execution sets up whatever its outcome
-- (PostgreSQL's instructions a call, `bench.pg_calls --statements`: 366k with
-- finish_one, 307k). A completed job is not queued again: nothing to announce.
UPDATE jobq.jobs j
   SET state = 'succeeded',
       finished_at = now(),
       result = CAST(:result AS jsonb),
       lease_expires_at = NULL,
       updated_at = now()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id IS NULL
        OR j.lease_key_id = CAST(:key_id AS bigint))
   AND (j.timeout_seconds IS NULL
        OR now() < j.attempted_at + make_interval(secs => j.timeout_seconds))
RETURNING j.*;


-- name: complete_many
-- Complete a batch of live leases held by this key, in brief as finish_many answers; a
-- stale, unknown or other key's lease matches no row. What finish_many does when every
-- ack completes, alone: three arrays instead of seven, no fail's expressions per row
-- (the drain's lease 100 + finish, bench.pg_calls: 211.6k of PostgreSQL's instructions
-- a job with finish_many, 196.9k).
UPDATE jobq.jobs j
   SET state = 'succeeded',
       finished_at = now(),
       result = i.result,
       lease_expires_at = NULL,
       updated_at = now()
  FROM unnest(CAST(:job_ids AS bigint[]), CAST(:lease_ids AS uuid[]),
              CAST(:results AS jsonb[]))
       WITH ORDINALITY AS i(job_id, lease_id, result, ord)
 WHERE j.id = i.job_id AND j.lease_id = i.lease_id AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id IS NULL
        OR j.lease_key_id = CAST(:key_id AS bigint))
   AND (j.timeout_seconds IS NULL
        OR now() < j.attempted_at + make_interval(secs => j.timeout_seconds))
RETURNING i.ord, j.id, j.queue, j.state, j.attempt, j.attempted_at, j.updated_at,
          j.last_error, j.traceparent, j.tracestate;


-- name: release
-- Give one live lease's job back to its queue, due in `delay_seconds`, without spending
-- its attempt (the claim's count is undone): a push target asked to be called later
-- (429 or 503 with Retry-After), or the dispatcher stopped mid-delivery. No row when
-- the lease is stale.
UPDATE jobq.jobs j
   SET state = 'queued',
       attempt = j.attempt - 1,
       run_at = statement_timestamp() + make_interval(
           secs => CAST(:delay_seconds AS double precision)),
       lease_expires_at = NULL,
       worker_id = NULL,
       updated_at = statement_timestamp()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
RETURNING j.id, jobq.announce_due(j.queue, j.run_at, 1) AS announced;


-- name: snooze
-- Put one live lease's job (of this key) back to the queue, due in `seconds`, without
-- spending its attempt (the claim's count is undone), while it has snoozed fewer than
-- `max_snoozes` times; a job whose cancellation was requested is cancelled instead.
-- Recorded in its history as an attempt with the outcome `snoozed`. No row when the
-- lease is stale, another key's, past its timeout, or the job is at its cap.
UPDATE jobq.jobs j
   SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                    ELSE 'queued' END::jobq.job_state,
       attempt = j.attempt - 1,
       snoozes = j.snoozes + 1,
       run_at = statement_timestamp() + make_interval(secs => CAST(:seconds AS double precision)),
       finished_at = CASE WHEN j.cancel_requested THEN statement_timestamp() END,
       lease_expires_at = NULL,
       worker_id = NULL,
       attempts = j.attempts || jobq.attempt_record(
           j.attempt, j.lease_id, j.worker_id, j.lease_key_id, j.attempted_at, 'snoozed',
           NULL),
       updated_at = statement_timestamp()
 WHERE j.id = CAST(:job_id AS bigint) AND j.lease_id = CAST(:lease_id AS uuid)
   AND j.state::text = 'running'
   AND (CAST(:key_id AS bigint) IS NULL OR j.lease_key_id IS NULL
        OR j.lease_key_id = CAST(:key_id AS bigint))
   AND (j.timeout_seconds IS NULL
        OR now() < j.attempted_at + make_interval(secs => j.timeout_seconds))
   AND j.snoozes < :max_snoozes
RETURNING j.*,
          CASE WHEN j.state = 'queued' THEN jobq.announce_due(j.queue, j.run_at, 1) END
              AS announced;
