"""tests/api/test_reaper.py through PgBouncer."""

from tests.api.test_reaper import *  # noqa: F403
