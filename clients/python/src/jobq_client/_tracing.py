"""OpenTelemetry, when its API is installed (`pip install 'jobq-client[otel]'`): an
enqueue sends the current span's W3C trace context (`traceparent`, `tracestate`
headers), and the worker runs each handler in a span that is a child of the context
its job was enqueued in. Without `opentelemetry-api`, nothing happens.

The carrier is W3C Trace Context whatever propagators the application configured:
that is what jobq stores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobq_client._models import JobRecord

try:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the API is an optional extra
    trace = None  # type: ignore[assignment]

_W3C = TraceContextTextMapPropagator() if trace is not None else None
SYSTEM = "jobq"


def headers() -> dict[str, str] | None:
    """The current span's `traceparent` (and `tracestate`) headers; None without a
    span, or without OpenTelemetry."""
    if _W3C is None:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier or None


@contextlib.contextmanager
def handling(job: JobRecord) -> Iterator[None]:
    """The handler's span, current while the handler runs (an exception leaving it is
    recorded): a child of the job's trace context, else of the current one."""
    if trace is None or _W3C is None:
        yield
        return
    parent = _W3C.extract(job.trace.to_json()) if job.trace is not None else None
    tracer = trace.get_tracer("jobq_client")
    with tracer.start_as_current_span(
        f"process {job.queue}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "jobq.job.type": job.type,
            "jobq.job.attempt": job.attempt,
        },
    ):
        yield
