"""Every SQL statement jobq runs, each with a name and a one-line purpose.

State changes are single statements: the claim is `SELECT … FOR UPDATE SKIP LOCKED`
inside a CTE feeding an `UPDATE … RETURNING`, and every transition on a lease checks
`lease_id` and `state = 'running'` in the `WHERE` of the same `UPDATE`, so a stale
worker matches nothing. Batches travel as arrays and are unpacked with `unnest`.
"""

from __future__ import annotations

from app.db.listener import CHANNEL, KEYS_CHANNEL
from app.db.statement import sql


def _retry_or_stop(*, retry: str, retry_after: str, error: str, stop_state: str) -> str:
    """SET clauses for a job whose attempt ended: another try, or a final state.

    Another try (when `retry` holds) waits `retry_after` seconds, or else an exponential
    delay: `backoff_base * 2^(attempt-1)`, capped at `backoff_cap`, then ±`backoff_jitter`.
    """
    return f"""
           state = CASE WHEN {retry} THEN 'queued'::jobq.job_state ELSE {stop_state} END,
           run_at = CASE WHEN {retry}
               THEN now() + make_interval(secs => coalesce({retry_after},
                   least(:backoff_base * power(2, j.attempt - 1), :backoff_cap)
                   * (1 + :backoff_jitter * (2 * random() - 1))))
               ELSE j.run_at END,
           finished_at = CASE WHEN {retry} THEN NULL ELSE now() END,
           last_error = {error},"""


def _announce(rows: str) -> str:
    """A CTE `announced`: NOTIFY, per queue, the earliest `run_at` of `rows` now queued, and
    how many they are (each wakes one waiting lease request).

    Delivered on commit, so a woken waiter finds the rows. The statement must read
    `announced` (`CROSS JOIN (SELECT count(*) FROM announced)`) for it to run.
    """
    return f"""announced AS MATERIALIZED (
        SELECT pg_notify('{CHANNEL}',
                         queue || ' ' || extract(epoch FROM min(run_at)) || ' ' || count(*))
          FROM {rows}
         WHERE state = 'queued'
         GROUP BY queue
    )"""


_AFTER_ANNOUNCING = "CROSS JOIN (SELECT count(*) FROM announced) AS announcements"

# The lease was taken with the caller's API key (no key: authentication is off).
_HELD_BY_KEY = "(CAST(:key_id AS bigint) IS NULL OR lease_key_id = CAST(:key_id AS bigint))"

_LEASE_EXPIRED_ERROR = """jsonb_build_object(
               'type', 'lease_expired',
               'message', 'the lease expired before the worker finished the job',
               'details', jsonb_build_object('worker_id', j.worker_id))"""


def _record_attempt(*, outcome: str, error: str) -> str:
    """SET clause appending the attempt that just ended to the job's history."""
    return f"""
           attempts = j.attempts || jsonb_build_object(
               'attempt', j.attempt, 'lease_id', j.lease_id, 'worker_id', j.worker_id,
               'key_id', j.lease_key_id,
               'started_at', j.attempted_at, 'finished_at', now(),
               'outcome', {outcome}, 'error', {error}),"""


def _backlog(queue: str) -> str:
    """The unfinished (queued + running) jobs of `queue`, each state counted up to `q.max_backlog`.

    A function (migration 0007) reading the claim and lease-expiry indexes, so the count
    costs at most `max_backlog` index entries; hidden from the planner, so the enqueue
    statements keep their cached generic plans.
    """
    return f"jobq.queue_backlog({queue}, q.max_backlog)"


ENQUEUE_ONE = sql(
    """
    WITH refused AS MATERIALIZED (
        -- Admission control: only a queue with a max_backlog pays for counting.
        SELECT * FROM (
            SELECT q.max_backlog, """
    + _backlog(":queue")
    + """ AS backlog
              FROM jobq.queues q
             WHERE q.name = :queue AND q.max_backlog IS NOT NULL
        ) AS admission
         WHERE backlog >= max_backlog
    ),
    inserted AS (
        INSERT INTO jobq.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                                    lease_seconds, idempotency_key, metadata)
        SELECT CAST(:queue AS text), CAST(:type AS text), CAST(:payload AS jsonb),
               CAST(:priority AS smallint),
               coalesce(CAST(:run_at AS timestamptz),
                        now() + make_interval(secs => CAST(:delay_seconds AS double precision))),
               CAST(:max_attempts AS integer), CAST(:lease_seconds AS integer),
               CAST(:idempotency_key AS text), CAST(:metadata AS jsonb)
         WHERE NOT EXISTS (SELECT FROM refused)
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
            DO NOTHING
        RETURNING j.*
    ),
    """
    + _announce("inserted")
    + """,
    found AS (
        SELECT false AS deduplicated, inserted.* FROM inserted """
    + _AFTER_ANNOUNCING
    + """
        UNION ALL
        SELECT true, j.* FROM jobq.jobs j
         WHERE NOT EXISTS (SELECT FROM inserted)
           AND j.queue = :queue AND j.idempotency_key = :idempotency_key
    )
    -- One row: the job (new or deduplicated), or NULLs; and the backlog if it was refused.
    SELECT found.*, refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog
      FROM (SELECT) AS one
      LEFT JOIN refused ON true
      LEFT JOIN found ON true
    """
)
"""Insert one job unless its queue is full, or return the job already holding its key."""

ENQUEUE_MANY = sql(
    """
    WITH input AS MATERIALIZED (
        SELECT nextval('jobq.jobs_id_seq') AS id, i.*
          FROM unnest(CAST(:types AS text[]), CAST(:payloads AS jsonb[]),
                      CAST(:priorities AS smallint[]), CAST(:run_ats AS timestamptz[]),
                      CAST(:delays AS double precision[]), CAST(:max_attempts AS integer[]),
                      CAST(:lease_seconds AS integer[]), CAST(:idempotency_keys AS text[]),
                      CAST(:metadatas AS jsonb[]))
               WITH ORDINALITY AS i(type, payload, priority, run_at, delay, max_attempts,
                                    lease_seconds, idempotency_key, metadata, ord)
    ),
    refused AS MATERIALIZED (
        -- Admission control, all or nothing: the batch's new jobs (keys not yet in the
        -- queue, each counted once) must fit under the queue's max_backlog, if it has one.
        SELECT * FROM (
            SELECT q.max_backlog, """
    + _backlog(":queue")
    + """ AS backlog,
                   (SELECT count(DISTINCT i.idempotency_key)
                           + count(*) FILTER (WHERE i.idempotency_key IS NULL)
                      FROM input i
                     WHERE NOT EXISTS (SELECT FROM jobq.jobs e
                                        WHERE e.queue = :queue
                                          AND e.idempotency_key = i.idempotency_key)
                   ) AS new_jobs
              FROM jobq.queues q
             WHERE q.name = :queue AND q.max_backlog IS NOT NULL
        ) AS admission
         WHERE new_jobs > 0 AND backlog + new_jobs > max_backlog
    ),
    inserted AS (
        INSERT INTO jobq.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                               lease_seconds, idempotency_key, metadata)
        SELECT id, :queue, type, payload, priority,
               coalesce(run_at, now() + make_interval(secs => delay)),
               max_attempts, lease_seconds, idempotency_key, metadata
          FROM input
         WHERE NOT EXISTS (SELECT FROM refused)
         ORDER BY ord
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL
            DO NOTHING
        RETURNING id, queue, idempotency_key, state, run_at
    ),
    """
    + _announce("inserted")
    + """
    SELECT i.ord,
           coalesce(mine.id, sibling.id, earlier.id) AS id,
           coalesce(mine.state, sibling.state, earlier.state) AS state,
           mine.id IS NULL AS deduplicated,
           refused.max_backlog AS refused_max_backlog, refused.backlog AS refused_backlog,
           refused.new_jobs AS refused_new_jobs
      FROM input i
      LEFT JOIN refused ON true
      LEFT JOIN inserted mine ON mine.id = i.id
      LEFT JOIN inserted sibling
             ON mine.id IS NULL AND sibling.idempotency_key = i.idempotency_key
      LEFT JOIN jobq.jobs earlier
             ON mine.id IS NULL AND sibling.id IS NULL
            AND earlier.queue = :queue AND earlier.idempotency_key = i.idempotency_key
     """
    + _AFTER_ANNOUNCING
    + """
     ORDER BY i.ord
    """
)
"""Insert a batch into one queue if it fits; rows in request order, duplicates resolved."""

LEASE = sql(
    """
    WITH active AS (
        -- paused queues are skipped (admin: pause/resume); a queue without a row is active
        SELECT q.name
          FROM unnest(CAST(:queues AS text[])) AS q(name)
         WHERE NOT EXISTS (SELECT FROM jobq.queues p WHERE p.name = q.name AND p.paused)
    ),
    picked AS (
        SELECT c.id
          FROM active AS q
         CROSS JOIN LATERAL (
                SELECT id, priority, run_at
                  FROM jobq.jobs
                 WHERE state = 'queued' AND queue = q.name AND run_at <= now()
                   AND (cardinality(CAST(:types AS text[])) = 0
                        OR type = ANY(CAST(:types AS text[])))
                 ORDER BY priority DESC, run_at, id
                 LIMIT :max_jobs
                   FOR UPDATE SKIP LOCKED
               ) c
         ORDER BY c.priority DESC, c.run_at, c.id
         LIMIT :max_jobs
    )
    UPDATE jobq.jobs j
       SET state = 'running',
           attempt = j.attempt + 1,
           lease_id = gen_random_uuid(),
           current_lease_seconds = coalesce(:lease_seconds, j.lease_seconds),
           lease_expires_at = now() + make_interval(
               secs => coalesce(:lease_seconds, j.lease_seconds)),
           worker_id = :worker_id,
           lease_key_id = :key_id,
           attempted_at = now(),
           started_at = coalesce(j.started_at, now()),
           updated_at = now()
     -- By primary key whatever the plan: a join to `picked` let a plan cached for small
     -- statistics merge-join along jobs_pkey from its first row.
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
       -- This transaction only (is_local): commit without waiting for the WAL flush. A
       -- lease lost to a PostgreSQL crash leaves its job queued, and the worker's finish
       -- is refused (the lease is unknown): at least once still holds. Any later
       -- durable commit (an enqueue, a finish) flushes this one first.
       AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
    RETURNING j.*
    """
)
"""Claim up to `max_jobs` due jobs from the given queues, best priority first, for one worker
(and the API key it used)."""

HEARTBEAT = sql(
    """
    WITH held AS (
        SELECT id, lease_expires_at, cancel_requested,
               -- Write the row only when something worth writing changed: the lease's
               -- length; its end, by more than the minimum interval (or a tenth of the
               -- lease, if less); or progress last stored that interval ago or more.
               -- So a runaway worker writes its job's row once per interval.
               coalesce(:extend_seconds, current_lease_seconds) <> current_lease_seconds
               OR now() + make_interval(secs => current_lease_seconds) NOT BETWEEN
                  lease_expires_at
                  AND lease_expires_at + make_interval(secs => least(
                      CAST(:min_interval AS double precision), current_lease_seconds / 10.0))
               OR (:has_progress AND (progress_updated_at IS NULL OR progress_updated_at
                   <= now() - make_interval(secs => CAST(:min_interval AS double precision))))
               AS needs_write
          FROM jobq.jobs
         WHERE id = :job_id AND lease_id = :lease_id AND state = 'running'
           AND """
    + _HELD_BY_KEY
    + """
    ),
    written AS (
        UPDATE jobq.jobs j
           SET current_lease_seconds = coalesce(:extend_seconds, j.current_lease_seconds),
               lease_expires_at = now() + make_interval(
                   secs => coalesce(:extend_seconds, j.current_lease_seconds)),
               progress_percent = CASE WHEN :has_progress THEN :percent ELSE j.progress_percent END,
               progress_stage = CASE WHEN :has_progress THEN :stage ELSE j.progress_stage END,
               progress_message = CASE WHEN :has_progress THEN :message ELSE j.progress_message END,
               progress_updated_at = CASE WHEN :has_progress THEN now()
                                          ELSE j.progress_updated_at END,
               updated_at = now()
          FROM held
         WHERE held.needs_write  -- decided on this statement's snapshot
           AND j.id = held.id AND j.lease_id = :lease_id AND j.state = 'running'
        RETURNING j.lease_expires_at, j.cancel_requested
    )
    SELECT true AS written, lease_expires_at, cancel_requested FROM written
    UNION ALL
    SELECT false, lease_expires_at, cancel_requested FROM held WHERE NOT held.needs_write
    """
)
"""Extend a live lease (of this key) and record progress, writing at most once per interval."""

# The acks of a batch, from arrays; of one call, from scalar parameters (a one-row input
# that the planner sizes right, so PostgreSQL keeps the generic plan instead of planning
# every call afresh: ~0.35 ms of its CPU per complete or fail).
_ACKS_INPUT = """
        SELECT *
          FROM unnest(CAST(:job_ids AS bigint[]), CAST(:lease_ids AS uuid[]),
                      CAST(:outcomes AS text[]), CAST(:results AS jsonb[]),
                      CAST(:errors AS jsonb[]), CAST(:retryable AS boolean[]),
                      CAST(:retry_after AS double precision[]))
               WITH ORDINALITY AS i(job_id, lease_id, outcome, result, error, retryable,
                                    retry_after, ord)"""
_ACK_INPUT = """
        SELECT CAST(:job_id AS bigint) AS job_id, CAST(:lease_id AS uuid) AS lease_id,
               CAST(:outcome AS text) AS outcome, CAST(:result AS jsonb) AS result,
               CAST(:error AS jsonb) AS error, CAST(:retryable AS boolean) AS retryable,
               CAST(:retry_after AS double precision) AS retry_after, CAST(1 AS bigint) AS ord"""
# What a batch's answer needs of each finished job (its results, the metrics): not the
# payload, result and history, which would cost decoding for nothing.
_FINISHED_BRIEF = "ord, id, queue, state, attempt, attempted_at, updated_at, last_error"


def _finish(acks: str, returned: str) -> str:
    """Complete or fail the live leases among `acks`, returning `returned` of each job."""
    return (
        """
    WITH input AS ("""
        + acks
        + """
    ),
    live AS (
        -- Each ack locks its job, found by primary key, and keeps it if the lease is
        -- still live (FOR UPDATE reads the row's latest version). The LATERAL lookup,
        -- with the state tested outside it (OFFSET 0 keeps the test from being pushed
        -- in), pins that plan whatever the statistics say: a plain join let a cached
        -- generic plan walk every running job once per ack.
        SELECT i.*
          FROM input i
         CROSS JOIN LATERAL (
                SELECT state
                  FROM jobq.jobs
                 WHERE id = i.job_id AND lease_id = i.lease_id
                   AND """
        + _HELD_BY_KEY
        + """
                OFFSET 0
                   FOR UPDATE
               ) held
         WHERE held.state = 'running'
    ),
    finished AS (
    UPDATE jobq.jobs j
       SET """
        + _retry_or_stop(
            # a job whose cancellation was requested is not retried: it ends `cancelled`
            retry="(i.outcome = 'fail' AND i.retryable AND j.attempt < j.max_attempts"
            " AND NOT j.cancel_requested)",
            retry_after="i.retry_after",
            error="CASE WHEN i.outcome = 'fail' THEN i.error ELSE j.last_error END",
            stop_state="CASE WHEN i.outcome = 'complete' THEN 'succeeded'::jobq.job_state"
            " WHEN j.cancel_requested THEN 'cancelled' ELSE 'failed' END",
        )
        + """
           result = CASE WHEN i.outcome = 'complete' THEN i.result ELSE j.result END,
           lease_expires_at = NULL,
           worker_id = NULL,
    """
        + _record_attempt(
            outcome="CASE WHEN i.outcome = 'complete' THEN 'succeeded' ELSE 'failed' END",
            error="i.error",
        )
        + """
           updated_at = now()
      FROM live i
     WHERE j.id = i.job_id  -- locked above with its lease checked, in this statement
    RETURNING i.ord, j.*
    ),
    """
        + _announce("finished")
        + f"""
    SELECT {returned} FROM finished """
        + _AFTER_ANNOUNCING
    )


FINISH = sql(_finish(_ACKS_INPUT, _FINISHED_BRIEF))
"""Complete or fail a batch of live leases held by this key; a stale, unknown or other key's
lease matches no row. Each finished job comes back in brief."""

FINISH_ONE = sql(_finish(_ACK_INPUT, "finished.*"))
"""Complete or fail one live lease held by this key, returning the whole job; no row when
the lease is stale, unknown or another key's."""

REAP_EXPIRED = sql(
    """
    WITH expired AS (
        SELECT id
          FROM jobq.jobs
         WHERE state = 'running' AND lease_expires_at < now()
         ORDER BY lease_expires_at
         LIMIT :batch_size
           FOR UPDATE SKIP LOCKED
    ),
    reaped AS (
    UPDATE jobq.jobs j
       SET """
    + _retry_or_stop(
        # a job whose cancellation was requested is not retried: it ends `cancelled`
        retry="(j.attempt < j.max_attempts AND NOT j.cancel_requested)",
        stop_state="CASE WHEN j.cancel_requested THEN 'cancelled'::jobq.job_state"
        " ELSE 'failed' END",
        retry_after="NULL",
        error=_LEASE_EXPIRED_ERROR,
    )
    + """
           lease_expires_at = NULL,
           worker_id = NULL,
    """
    + _record_attempt(outcome="'lease_expired'", error=_LEASE_EXPIRED_ERROR)
    + """
           updated_at = now()
      FROM expired
     WHERE j.id = expired.id
    RETURNING j.id, j.queue, j.state, j.attempt, j.run_at
    ),
    """
    + _announce("reaped")
    + """
    SELECT reaped.* FROM reaped """
    + _AFTER_ANNOUNCING
)
"""Return up to `batch_size` expired leases' jobs to the queue (or `failed`, `cancelled`)."""

PRUNE_FINISHED = sql(
    """
    WITH ages AS (
        SELECT CAST(:succeeded_age AS double precision) AS succeeded,
               CAST(:failed_age AS double precision) AS failed
    ),
    doomed AS (
        SELECT id
          FROM jobq.jobs, ages
         WHERE finished_at < now() - make_interval(secs => least(ages.succeeded, ages.failed))
           AND ((state = 'succeeded'
                 AND finished_at < now() - make_interval(secs => ages.succeeded))
             OR (state IN ('failed', 'cancelled')
                 AND finished_at < now() - make_interval(secs => ages.failed)))
         ORDER BY finished_at
         LIMIT :batch_size
           FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobq.jobs j
     USING doomed
     WHERE j.id = doomed.id
    RETURNING j.state
    """
)
"""Delete up to `batch_size` finished jobs past their retention (an age of NULL keeps them)."""

TRY_MAINTENANCE_LOCK = sql(
    "SELECT pg_try_advisory_xact_lock(:key) AS leader, extract(epoch FROM clock_timestamp()) AS at"
)
"""Become the one maintainer (reaper, pruner) for this transaction, if none is; and when."""

CLOCK = sql("SELECT extract(epoch FROM clock_timestamp())")
"""The database's clock, which every replica shares (epoch seconds)."""

GET_JOB = sql("SELECT * FROM jobq.jobs WHERE id = :job_id")
"""One job by id."""

GET_JOBS = sql("SELECT * FROM jobq.jobs WHERE id = ANY(CAST(:job_ids AS bigint[]))")
"""Several jobs by id (to explain why some leases matched nothing)."""

LIST_JOBS = sql(
    """
    SELECT *
      FROM jobq.jobs
     WHERE (CAST(:queue AS text) IS NULL OR queue = :queue)
       AND (CAST(:state AS jobq.job_state) IS NULL OR state = CAST(:state AS jobq.job_state))
       AND (CAST(:type AS text) IS NULL OR type = :type)
       AND (CAST(:allowed_names AS text[]) IS NULL
            OR queue = ANY(CAST(:allowed_names AS text[]))
            OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
       AND id > :after
     ORDER BY id
     LIMIT :limit
    """
)
"""A page of jobs after a given id, optionally filtered by queue, state and type, and limited
to the queues an API key may read (names, and LIKE patterns; NULL names: every queue)."""

PING = sql("SELECT 1")
"""Is the database answering?"""


# ---- API keys ------------------------------------------------------------------------


def _announce_keys(rows: str, event: str) -> str:
    """A CTE `announced`: NOTIFY `jobq_keys` with `<event> <lookup id>` for each of `rows`."""
    return f"""announced AS MATERIALIZED (
        SELECT pg_notify('{KEYS_CHANNEL}', '{event} ' || lookup_id) FROM {rows}
    )"""


CREATE_KEY = sql(
    """
    WITH created AS (
        INSERT INTO jobq.api_keys (name, lookup_id, secret_hash, scopes, queues)
        VALUES (:name, :lookup_id, :secret_hash, CAST(:scopes AS text[]),
                CAST(:queues AS text[]))
        ON CONFLICT DO NOTHING
        RETURNING *
    ),
    """
    + _announce_keys("created", "created")
    + """
    SELECT created.* FROM created """
    + _AFTER_ANNOUNCING
)
"""Store a new key's digest; no row when its name (or, rarely, its lookup id) is taken."""

REVOKE_KEY = sql(
    """
    WITH revoked AS (
        UPDATE jobq.api_keys
           SET revoked_at = coalesce(revoked_at, now())
         WHERE name = :name
        RETURNING *
    ),
    """
    + _announce_keys("revoked", "revoked")
    + """
    SELECT revoked.* FROM revoked """
    + _AFTER_ANNOUNCING
)
"""Revoke a key by name (a second revocation keeps the first time), and tell every replica."""

GET_KEY = sql("SELECT * FROM jobq.api_keys WHERE lookup_id = :lookup_id")
"""The key with this lookup id (the public part of the key)."""

GET_KEY_BY_NAME = sql("SELECT * FROM jobq.api_keys WHERE name = :name")
"""The key with this name."""

LIST_KEYS = sql("SELECT * FROM jobq.api_keys ORDER BY name")
"""Every key, revoked ones too, by name."""

ANY_KEY = sql("SELECT EXISTS (SELECT FROM jobq.api_keys)")
"""Was any key ever created? (Revoked keys count: revoking never reopens the service.)"""

TOUCH_KEY = sql("UPDATE jobq.api_keys SET last_used_at = now() WHERE id = :key_id")
"""Record that a key was just used."""


# ---- admin actions: cancel, retry, redrive, pause and resume, purge, delete -------------
#
# Each action is one statement whose `WHERE` holds the state it may start from; a miss
# is explained afterwards (404 or 409) from the job as it then is.


def _requeue(*, run_at: str) -> str:
    """SET clauses sending a finished job back to `queued`; its history is kept."""
    return f"""
           state = 'queued',
           run_at = {run_at},
           attempt = CASE WHEN :reset_attempts THEN 0 ELSE j.attempt END,
           -- a job that used up its attempts gets one more (as River and Oban do)
           max_attempts = CASE WHEN :reset_attempts THEN j.max_attempts
                               ELSE greatest(j.max_attempts, j.attempt + 1) END,
           cancel_requested = false,
           lease_id = NULL,
           lease_expires_at = NULL,
           current_lease_seconds = NULL,
           worker_id = NULL,
           finished_at = NULL,
           updated_at = now()"""


CANCEL_JOB = sql(
    """
    UPDATE jobq.jobs
       SET state = CASE WHEN state = 'queued' THEN 'cancelled'::jobq.job_state ELSE state END,
           finished_at = CASE WHEN state = 'queued' THEN now() ELSE finished_at END,
           cancel_requested = true,
           updated_at = now()
     WHERE id = :job_id AND state IN ('queued', 'running')
    RETURNING *
    """
)
"""Cancel a queued job at once; flag a running one for its worker to see on its heartbeat."""

RETRY_JOB = sql(
    """
    WITH retried AS (
    UPDATE jobq.jobs j
       SET """
    + _requeue(run_at="coalesce(CAST(:run_at AS timestamptz), now())")
    + """
     WHERE j.id = :job_id AND j.state IN ('failed', 'cancelled')
    RETURNING j.*
    ),
    """
    + _announce("retried")
    + """
    SELECT retried.* FROM retried """
    + _AFTER_ANNOUNCING
)
"""Send one failed or cancelled job back to the queue, due at `run_at` (default now)."""

REDRIVE_FAILED = sql(
    """
    WITH picked AS (
        SELECT id
          FROM jobq.jobs
         WHERE queue = :queue AND state = 'failed'
           AND (CAST(:type AS text) IS NULL OR type = :type)
           AND (CAST(:error_type AS text) IS NULL OR last_error->>'type' = :error_type)
           AND (CAST(:failed_since AS timestamptz) IS NULL OR finished_at >= :failed_since)
         ORDER BY finished_at, id
         LIMIT :limit
           FOR UPDATE SKIP LOCKED
    ),
    retried AS (
    UPDATE jobq.jobs j
       SET """
    + _requeue(run_at="now()")
    + """
      FROM picked
     WHERE j.id = picked.id
    RETURNING j.queue, j.state, j.run_at
    ),
    """
    + _announce("retried")
    + """
    SELECT count(*) AS retried FROM retried """
    + _AFTER_ANNOUNCING
)
"""Send up to `limit` failed jobs of a queue, oldest failure first, back to the queue."""

PAUSE_QUEUE = sql(
    """
    INSERT INTO jobq.queues AS q (name, paused, paused_at)
    VALUES (:queue, true, now())
    ON CONFLICT (name) DO UPDATE
       SET paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now()
    RETURNING q.name, q.paused, q.paused_at
    """
)
"""Pause a queue (its row is created if it has none); pausing again keeps `paused_at`."""

RESUME_QUEUE = sql(
    f"""
    WITH resumed AS (
        UPDATE jobq.queues
           SET paused = false, paused_at = NULL, updated_at = now()
         WHERE name = :queue AND paused
        RETURNING name, paused, paused_at
    ),
    announced AS MATERIALIZED (
        SELECT pg_notify('{CHANNEL}', name || ' ' || extract(epoch FROM now())) FROM resumed
    )
    SELECT resumed.* FROM resumed {_AFTER_ANNOUNCING}
    UNION ALL
    SELECT :queue, false, NULL WHERE NOT EXISTS (SELECT FROM resumed)
    """
)
"""Resume a paused queue and wake the lease requests waiting on it; a no-op if not paused."""

PURGE_QUEUED = sql(
    """
    WITH bound AS (
        SELECT coalesce(CAST(:up_to AS bigint), (SELECT max(id) FROM jobq.jobs)) AS up_to
    ),
    doomed AS (
        SELECT id
          FROM jobq.jobs
         WHERE queue = :queue AND state = 'queued' AND id <= (SELECT up_to FROM bound)
         LIMIT :batch_size
           FOR UPDATE SKIP LOCKED
    ),
    deleted AS (
        DELETE FROM jobq.jobs j
         USING doomed
         WHERE j.id = doomed.id AND j.state = 'queued'
        RETURNING j.id
    )
    SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT up_to FROM bound) AS up_to
    """
)
"""Delete up to `batch_size` queued jobs of a queue with ids up to `up_to` (default: all now)."""

DELETE_JOB = sql("DELETE FROM jobq.jobs WHERE id = :job_id AND state <> 'running' RETURNING id")
"""Delete one job unless it is running."""

# ---- queue statistics ------------------------------------------------------------------
# Exact figures without reading the whole table: a job enqueued, first leased or finished
# in the last hour is now queued, running, or finished in the last hour, so those three
# sets (the claim, lease-expiry and finished indexes) hold every window's rows. Failed
# and cancelled jobs are counted through their own partial index (migration 0006);
# succeeded jobs are counted only within the windows, as retention may keep millions.

# Queued and running jobs, each set read through its own partial index.
_LIVE_ROWS = """
        SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
          FROM jobq.jobs
         WHERE state = 'queued' AND (CAST(:queue AS text) IS NULL OR queue = :queue)
        UNION ALL
        SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
          FROM jobq.jobs
         WHERE state = 'running' AND (CAST(:queue AS text) IS NULL OR queue = :queue)"""

_STATS_LIVE = """
    SELECT queue,
           count(*) FILTER (WHERE state = 'queued') AS queued,
           count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) AS due,
           count(*) FILTER (WHERE state = 'running') AS running,
           CAST(extract(epoch FROM now() - min(run_at) FILTER (
               WHERE state = 'queued' AND run_at <= now())) AS double precision)
               AS oldest_due_age_seconds"""

_STATS_DEAD = """
    dead AS (
        SELECT queue,
               count(*) FILTER (WHERE state = 'failed') AS failed,
               count(*) FILTER (WHERE state = 'cancelled') AS cancelled
          FROM jobq.jobs
         WHERE state IN ('failed', 'cancelled')
           AND (CAST(:queue AS text) IS NULL OR queue = :queue)
         GROUP BY queue
    ),
    settings AS (
        SELECT name AS queue, paused, paused_at
          FROM jobq.queues
         WHERE CAST(:queue AS text) IS NULL OR name = :queue
    )"""

_STATS_JOINED = """
      FROM live
      FULL JOIN dead USING (queue)
      FULL JOIN settings USING (queue)
     ORDER BY queue"""

_STATS_COLUMNS = """
           coalesce(live.queued, 0) AS queued,
           coalesce(live.due, 0) AS due,
           coalesce(live.running, 0) AS running,
           coalesce(dead.failed, 0) AS failed,
           coalesce(dead.cancelled, 0) AS cancelled,
           live.oldest_due_age_seconds,
           coalesce(settings.paused, false) AS paused,
           settings.paused_at"""

QUEUE_OVERVIEW = sql(
    """
    WITH recent AS ("""
    + _LIVE_ROWS
    + """
    ),
    live AS ("""
    + _STATS_LIVE
    + """
          FROM recent
         GROUP BY queue
    ),"""
    + _STATS_DEAD
    + """
    SELECT queue,"""
    + _STATS_COLUMNS
    + _STATS_JOINED
)
"""Per queue: jobs queued (and due), running, failed, cancelled; oldest due job's age; paused."""

QUEUE_STATS = sql(
    """
    WITH recent AS ("""
    + _LIVE_ROWS
    + """
        UNION ALL
        SELECT queue, state, run_at, created_at, started_at, attempted_at, finished_at
          FROM jobq.jobs
         WHERE finished_at > now() - interval '1 hour'
           AND state NOT IN ('queued', 'running')
           AND (CAST(:queue AS text) IS NULL OR queue = :queue)
    ),
    live AS ("""
    + _STATS_LIVE
    + """,
           count(*) FILTER (WHERE created_at > now() - interval '1 minute') AS enqueued_1m,
           count(*) FILTER (WHERE created_at > now() - interval '1 hour') AS enqueued_1h,
           count(*) FILTER (
               WHERE state = 'succeeded' AND finished_at > now() - interval '1 minute'
           ) AS succeeded_1m,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded_1h,
           count(*) FILTER (
               WHERE state = 'failed' AND finished_at > now() - interval '1 minute'
           ) AS failed_1m,
           count(*) FILTER (WHERE state = 'failed') AS failed_1h,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
               ORDER BY extract(epoch FROM started_at - created_at)
           ) FILTER (WHERE started_at > now() - interval '1 hour') AS wait_seconds,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
               ORDER BY extract(epoch FROM finished_at - attempted_at)
           ) FILTER (WHERE state IN ('succeeded', 'failed')) AS run_seconds
          FROM recent
         GROUP BY queue
    ),"""
    + _STATS_DEAD
    + """
    SELECT queue,"""
    + _STATS_COLUMNS
    + """,
           coalesce(live.enqueued_1m, 0) AS enqueued_1m,
           coalesce(live.enqueued_1h, 0) AS enqueued_1h,
           coalesce(live.succeeded_1m, 0) AS succeeded_1m,
           coalesce(live.succeeded_1h, 0) AS succeeded_1h,
           coalesce(live.failed_1m, 0) AS failed_1m,
           coalesce(live.failed_1h, 0) AS failed_1h,
           live.wait_seconds,
           live.run_seconds"""
    + _STATS_JOINED
)
"""QUEUE_OVERVIEW plus the last minute's and hour's activity and wait/run percentiles."""

RUNNING_JOBS = sql(
    """
    SELECT id, queue, type, attempt, max_attempts, worker_id, attempted_at,
           lease_expires_at, cancel_requested, progress_percent, progress_stage,
           progress_message, progress_updated_at
      FROM (SELECT *, row_number() OVER (PARTITION BY queue ORDER BY attempted_at, id) AS n
              FROM jobq.jobs
             WHERE state = 'running'
               AND (CAST(:queue AS text) IS NULL OR queue = :queue)) running
     WHERE n <= :per_queue
     ORDER BY queue, attempted_at, id
    """
)
"""The longest-running jobs of each queue (at most `per_queue`), with their progress."""

DATABASE_HEALTH = sql(
    """
    SELECT t.n_live_tup AS live_tuples,
           t.n_dead_tup AS dead_tuples,
           t.last_autovacuum,
           t.last_vacuum,
           (SELECT CAST(extract(epoch FROM now() - min(a.xact_start)) AS double precision)
              FROM pg_stat_activity a
             WHERE coalesce(a.datname, current_database()) = current_database()
               AND a.pid <> pg_backend_pid()
               AND a.backend_type <> 'autovacuum worker'
               AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
           ) AS oldest_transaction_age_seconds,
           (SELECT max(age) FROM (
                SELECT age(a.backend_xmin) AS age
                  FROM pg_stat_activity a
                 WHERE coalesce(a.datname, current_database()) = current_database()
                   AND a.pid <> pg_backend_pid()
                   AND a.backend_type <> 'autovacuum worker'
                UNION ALL
                SELECT age(a.backend_xid)
                  FROM pg_stat_activity a
                 WHERE coalesce(a.datname, current_database()) = current_database()
                   AND a.pid <> pg_backend_pid()
                UNION ALL
                SELECT age(s.xmin) FROM pg_replication_slots s
                UNION ALL
                SELECT age(p.transaction) FROM pg_prepared_xacts p
                 WHERE p.database = current_database()
            ) held) AS oldest_xmin_age
      FROM (SELECT 1) one
      LEFT JOIN pg_stat_user_tables t ON t.relid = 'jobq.jobs'::regclass
    """
)
"""Dead tuples and vacuums of the jobs table; the oldest transaction holding back vacuum."""


GET_QUEUE_SETTINGS = sql("SELECT name, max_backlog FROM jobq.queues WHERE name = :queue")
"""A queue's settings row, if it was ever configured."""

SET_QUEUE_MAX_BACKLOG = sql(
    """
    INSERT INTO jobq.queues AS q (name, max_backlog)
    VALUES (:queue, :max_backlog)
    ON CONFLICT (name) DO UPDATE
        SET max_backlog = excluded.max_backlog, updated_at = now()
    RETURNING q.name, q.max_backlog
    """
)
"""Set (or clear, with NULL) a queue's maximum backlog, creating its settings row if needed."""
