"""tests/api/test_longpoll.py through PgBouncer."""

from tests.api.test_longpoll import *  # noqa: F403
