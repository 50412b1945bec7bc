-- Circuit breakers of delivery targets (`jobq.delivery_breakers`, one row per target
-- key). A healthy target has no row or a row of zeros; only failures, and the first
-- success after them, write.


-- name: breaker_add
-- Give a target its breaker row (of zeros), if it has none: what breaker_failed updates.
INSERT INTO jobq.delivery_breakers (target)
VALUES (:target)
    ON CONFLICT (target) DO NOTHING;


-- name: breaker_failed
-- Count a failed delivery to a target; the one that makes `threshold` in a row opens its
-- breaker for `pause_seconds` doubled per earlier trip (at most `max_pause_seconds`),
-- unless it is open already. Once the pause is over, one more failure opens it again.
UPDATE jobq.delivery_breakers b
   SET failures = b.failures + 1,
       failed_at = statement_timestamp(),
       last_error = :error,
       trips = b.trips + CAST(o.opens AS integer),
       open_until = CASE WHEN o.opens
                         THEN statement_timestamp() + make_interval(secs => least(
                                  CAST(:max_pause_seconds AS double precision),
                                  CAST(:pause_seconds AS double precision)
                                      * power(2, least(b.trips, 30))))
                         ELSE b.open_until END
  FROM (SELECT target,
               failures + 1 >= :threshold
               AND (open_until IS NULL OR open_until <= statement_timestamp()) AS opens
          FROM jobq.delivery_breakers
         WHERE target = :target
           FOR UPDATE) AS o
 WHERE b.target = o.target
RETURNING b.target, b.failures, b.trips, b.open_until, b.failed_at, b.last_error;


-- name: breaker_succeeded
-- A delivery to a target succeeded: its breaker closes and forgets its failures (no
-- write when there were none).
UPDATE jobq.delivery_breakers
   SET failures = 0, trips = 0, open_until = NULL
 WHERE target = :target AND (failures > 0 OR trips > 0 OR open_until IS NOT NULL);


-- name: breaker_reset
-- An operator closes a target's breaker: deliveries resume at once.
UPDATE jobq.delivery_breakers
   SET failures = 0, trips = 0, open_until = NULL
 WHERE target = :target
RETURNING target, failures, trips, open_until, failed_at, last_error;


-- name: breakers
-- The breakers of these targets (a target without a row is closed).
SELECT target, failures, trips, open_until, failed_at, last_error
  FROM jobq.delivery_breakers
 WHERE target = ANY(CAST(:targets AS text[]));
