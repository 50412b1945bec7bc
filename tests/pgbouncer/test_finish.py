"""tests/api/test_finish.py through PgBouncer."""

from tests.api.test_finish import *  # noqa: F403
