"""One rule for a histogram's percentiles: `jobq.histogram_percentiles`.

The queue statistics (wait and run times) and the push statistics (delivery latency)
each computed the nearest-rank p50 and p95 of their duration buckets with the same
window functions written out again. Both now call this function, so the rule and its
bound (docs/operations/monitoring.md) stand in one place.

Revision ID: 0041
Revises: 0040
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION jobq.histogram_percentiles(buckets smallint[],
                                                   jobs double precision[])
            RETURNS double precision[]
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            AS $$
            -- the nearest-rank p50 and p95 of a histogram (each bucket once, with its
            -- jobs), as their buckets' durations; NULL for an empty one
            SELECT CASE WHEN count(*) > 0 THEN ARRAY[
                       jobq.bucket_seconds(min(h.bucket) FILTER (WHERE h.up_to >= 0.5 * h.total)),
                       jobq.bucket_seconds(min(h.bucket) FILTER (WHERE h.up_to >= 0.95 * h.total))]
                   END
              FROM (SELECT b.bucket, sum(b.jobs) OVER (ORDER BY b.bucket) AS up_to,
                           sum(b.jobs) OVER () AS total
                      FROM unnest(buckets, jobs) AS b(bucket, jobs)
                     WHERE b.jobs > 0) AS h
        $$
        """
    )
    op.execute(
        "COMMENT ON FUNCTION jobq.histogram_percentiles(smallint[], double precision[]) IS"
        " 'The nearest-rank p50 and p95 of a histogram of duration buckets.'"
    )
    op.execute(
        "REVOKE EXECUTE ON FUNCTION jobq.histogram_percentiles(smallint[], double precision[])"
        " FROM PUBLIC"
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION jobq.histogram_percentiles(smallint[], double precision[])")
