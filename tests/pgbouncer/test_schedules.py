"""tests/api/test_schedules.py through PgBouncer."""

from tests.api.test_schedules import *  # noqa: F403
