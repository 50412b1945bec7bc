"""tests/api/test_vacuum.py through PgBouncer."""

from tests.api.test_vacuum import *  # noqa: F403
