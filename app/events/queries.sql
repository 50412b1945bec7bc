-- The job-event outbox (jobq.job_events, migration 0032): events are written by triggers
-- in the transaction of each change, given their commit order (`position`) by
-- jobq.stamp_events, read in that order by the event stream, and pruned after retention.


-- name: stamp_events
-- Give up to `batch_size` committed events the next positions; NULL: another session is
-- stamping.
SELECT jobq.stamp_events(:batch_size) AS stamped;


-- name: event_bounds
-- The first and last positions still kept (NULL, NULL: no event was ever stamped).
SELECT min(position) AS first, max(position) AS last
  FROM jobq.job_events
 WHERE position IS NOT NULL;


-- name: events_between
-- The events at positions after `after` up to `up_to` (positions are gapless), of the
-- queues an API key may read (names, and LIKE patterns; NULL names: every queue),
-- narrowed to the queues, job types and kinds asked for (NULL: all).
SELECT position, at, kind::text AS kind, queue, job_id, type, attempt
  FROM jobq.job_events
 WHERE position > :after AND position <= :up_to
   AND (CAST(:allowed_names AS text[]) IS NULL
        OR queue = ANY(CAST(:allowed_names AS text[]))
        OR queue LIKE ANY(CAST(:allowed_patterns AS text[])))
   AND (CAST(:queues AS text[]) IS NULL OR queue = ANY(CAST(:queues AS text[])))
   AND (CAST(:types AS text[]) IS NULL OR type = ANY(CAST(:types AS text[])))
   AND (CAST(:kinds AS text[]) IS NULL OR kind::text = ANY(CAST(:kinds AS text[])))
 ORDER BY position;


-- name: prune_events
-- Delete the oldest `batch_size` stamped events written more than `retain_seconds` ago,
-- as a prefix of the positions (a reader resuming before the first kept one knows it
-- missed some), keeping the newest (it tells a reader's position from a stranger's).
WITH oldest AS (
    SELECT position, at
      FROM jobq.job_events
     WHERE position IS NOT NULL
     ORDER BY position
     LIMIT :batch_size
),
bound AS (
    SELECT least(min(position) FILTER (WHERE at >= now() - make_interval(secs => :retain_seconds)),
                 (SELECT max(position) FROM jobq.job_events)) AS keep_from
      FROM oldest
),
pruned AS (
    DELETE FROM jobq.job_events e
     USING oldest o, bound b
     WHERE e.position = o.position AND o.position < b.keep_from
    RETURNING e.position
)
SELECT count(*) AS pruned FROM pruned;


-- name: put_subscription
-- Create or replace an event subscription; a new one starts after the last event now,
-- with `new_secret` unless secrets are given (a replaced one keeps its own).
INSERT INTO jobq.event_subscriptions AS s (name, url, queues, types, kinds, secrets, paused,
                                           position)
VALUES (:name, :url, CAST(:queues AS text[]), CAST(:types AS text[]), CAST(:kinds AS text[]),
        coalesce(CAST(:secrets AS text[]), ARRAY[CAST(:new_secret AS text)]), :paused,
        (SELECT coalesce(max(position), 0) FROM jobq.job_events WHERE position IS NOT NULL))
ON CONFLICT (name) DO UPDATE
   SET url = excluded.url, queues = excluded.queues, types = excluded.types,
       kinds = excluded.kinds, secrets = coalesce(CAST(:secrets AS text[]), s.secrets),
       paused = excluded.paused, updated_at = now()
RETURNING (xmax = 0) AS created, s.*;


-- name: get_subscription
-- One event subscription by name.
SELECT * FROM jobq.event_subscriptions WHERE name = :name;


-- name: list_subscriptions
-- Every event subscription, by name.
SELECT * FROM jobq.event_subscriptions ORDER BY name;


-- name: delete_subscription
-- Delete an event subscription.
DELETE FROM jobq.event_subscriptions WHERE name = :name RETURNING name;


-- name: claim_subscription
-- Lease, for `lease_seconds`, the subscription due the longest that has events to look
-- at (not paused, its retry due, no live lease): one dispatcher sends its batches.
UPDATE jobq.event_subscriptions s
   SET lease_id = :lease_id, leased_until = now() + make_interval(secs => :lease_seconds)
  FROM (SELECT name
          FROM jobq.event_subscriptions
         WHERE NOT paused AND next_attempt_at <= now()
           AND (leased_until IS NULL OR leased_until < now())
           AND position < (SELECT coalesce(max(position), 0) FROM jobq.job_events
                            WHERE position IS NOT NULL)
         ORDER BY next_attempt_at
         LIMIT 1
           FOR UPDATE SKIP LOCKED) AS due
 WHERE s.name = due.name
RETURNING s.*;


-- name: advance_subscription
-- The events up to `position` were delivered (`status`: the answer's) or had nothing to
-- send (`status` NULL): the cursor moves on and the lease ends; a lease another
-- dispatcher took over matches nothing.
UPDATE jobq.event_subscriptions
   SET position = greatest(position, :position), attempts = 0, next_attempt_at = now(),
       lease_id = NULL, leased_until = NULL,
       last_status = coalesce(CAST(:status AS integer), last_status),
       last_error = CASE WHEN CAST(:status AS integer) IS NULL THEN last_error END,
       delivered_at = CASE WHEN CAST(:status AS integer) IS NULL THEN delivered_at
                           ELSE now() END
 WHERE name = :name AND lease_id = :lease_id
RETURNING name;


-- name: skip_expired_events
-- The events up to `position` expired before the subscription received them: its cursor
-- moves past them and `missed` counts them; the lease stays. How many it missed in all.
UPDATE jobq.event_subscriptions
   SET missed = missed + (:position - position), position = :position
 WHERE name = :name AND lease_id = :lease_id AND position < :position
RETURNING missed;


-- name: retry_subscription
-- The batch was not delivered: try again after `delay_seconds` (`attempted`: it was
-- sent and failed, else held back by the target's breaker); the lease ends.
UPDATE jobq.event_subscriptions
   SET attempts = attempts + CASE WHEN :attempted THEN 1 ELSE 0 END,
       next_attempt_at = now() + make_interval(secs => :delay_seconds),
       lease_id = NULL, leased_until = NULL,
       last_status = CASE WHEN :attempted THEN CAST(:status AS integer) ELSE last_status END,
       last_error = CASE WHEN :attempted THEN :error ELSE last_error END
 WHERE name = :name AND lease_id = :lease_id
RETURNING name;
