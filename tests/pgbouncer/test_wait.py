"""tests/api/test_wait.py through PgBouncer."""

from tests.api.test_wait import *  # noqa: F403
