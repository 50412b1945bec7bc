"""tests/api/test_admin.py through PgBouncer."""

from tests.api.test_admin import *  # noqa: F403
