-- The job-event outbox (jobq.job_events, migration 0028): events are written by triggers
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
