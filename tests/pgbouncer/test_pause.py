"""tests/api/test_pause.py through PgBouncer."""

from tests.api.test_pause import *  # noqa: F403
