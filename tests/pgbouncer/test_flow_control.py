"""tests/api/test_flow_control.py through PgBouncer."""

from tests.api.test_flow_control import *  # noqa: F403
