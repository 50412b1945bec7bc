"""tests/api/test_pruner.py through PgBouncer."""

from tests.api.test_pruner import *  # noqa: F403
