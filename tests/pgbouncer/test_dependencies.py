"""tests/api/test_dependencies.py through PgBouncer."""

from tests.api.test_dependencies import *  # noqa: F403
