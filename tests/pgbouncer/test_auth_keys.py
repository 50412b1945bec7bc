"""tests/api/test_auth_keys.py through PgBouncer."""

from tests.api.test_auth_keys import *  # noqa: F403
