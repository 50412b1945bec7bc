"""The Python SDK without OpenTelemetry's API installed (it is the optional extra
`jobq-client[otel]`): it imports, enqueues send no trace headers, and a handler runs
without a span."""

from __future__ import annotations

import subprocess
import sys

WITHOUT_OPENTELEMETRY = """
import sys
sys.modules["opentelemetry"] = None  # as if not installed: importing it fails
import jobq_client
from jobq_client import _calls, _tracing
from jobq_client._models import JobRecord, JobSpec

assert _tracing.trace is None
assert _tracing.headers() is None
assert _calls.enqueue("q", JobSpec("t")).headers is None
record = JobRecord.from_json({
    "id": 1, "queue": "q", "type": "t", "state": "running", "priority": 0, "attempt": 1,
    "max_attempts": 5, "lease_seconds": 60, "run_at": "2026-11-28T00:00:00Z",
    "created_at": "2026-11-28T00:00:00Z", "updated_at": "2026-11-28T00:00:00Z",
    "trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
})
with _tracing.handling(record):
    ran = True
assert ran
print("ok")
"""


def test_the_sdk_works_without_opentelemetry() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENTELEMETRY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_with_opentelemetry_an_enqueue_outside_a_span_sends_no_headers() -> None:
    from jobq_client import _calls
    from jobq_client._models import JobSpec

    assert _calls.enqueue("q", JobSpec("t")).headers is None
