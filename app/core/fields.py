"""The bounds of a job's fields, defined once: the API's schemas state them (and the
OpenAPI document with them), and the SQL enqueue functions apply the same ones
(`jobq.check_job`, migration 0023), which tests/db/test_field_limits.py holds to these.

Names follow `app.core.names` (`NAME_PATTERN`, `MAX_NAME_LENGTH`); times,
`app.core.timestamps`. The limits an operator sets (payload size, JSON depth, the
longest lease) are settings, which the service records for the SQL functions."""

from __future__ import annotations

MAX_TEXT_LENGTH = 255  # idempotency and concurrency keys, worker ids, stages, error types
MIN_PRIORITY = -32768  # a smallint
MAX_PRIORITY = 32767
MAX_ATTEMPTS_LIMIT = 1000  # a job's, a queue's and a schedule's `max_attempts`
MAX_DELAY_SECONDS = 366 * 24 * 3600
