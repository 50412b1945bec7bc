"""tests/api/test_enqueue.py through PgBouncer."""

from tests.api.test_enqueue import *  # noqa: F403
