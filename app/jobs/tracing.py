"""jobq's own spans of what it does to jobs: enqueue, lease, complete and fail, each a
child of the request's span and linked to the traces its jobs were enqueued in (their
stored `traceparent`), so that a trace of the producer leads to them.

Through the OpenTelemetry API, to the tracer provider OpenTelemetry is configured with,
when `JOBQ_OPENTELEMETRY` is on (as FastAPI's request spans). Off, a call costs one
comparison: nothing is read, parsed or made.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Protocol

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, TraceFlags, TraceState

from app import __version__

SPAN_NAMES = {
    "enqueue": "jobq.enqueue",
    "lease": "jobq.lease",
    "complete": "jobq.complete",
    "fail": "jobq.fail",
}


class Traced(Protocol):
    """A job with its stored trace context (a row, or a job being enqueued)."""

    @property
    def traceparent(self) -> str | None: ...
    @property
    def tracestate(self) -> str | None: ...


def link_to(traceparent: str, tracestate: str | None) -> Link:
    """A link to the span a stored (so checked) W3C traceparent names."""
    state = TraceState.from_header([tracestate]) if tracestate else None
    context = SpanContext(
        trace_id=int(traceparent[3:35], 16),
        span_id=int(traceparent[36:52], 16),
        is_remote=True,
        trace_flags=TraceFlags(int(traceparent[53:55], 16) & TraceFlags.SAMPLED),
        trace_state=state,
    )
    return Link(context)


class JobSpans:
    """Records jobq's spans of jobs when tracing is on (`enabled`)."""

    def __init__(self, enabled: bool) -> None:
        self._tracer = trace.get_tracer("jobq", __version__) if enabled else None

    def start(self) -> int | None:
        """When an operation begins (None: tracing is off), for `record`."""
        return time.time_ns() if self._tracer is not None else None

    def record(
        self,
        operation: str,
        started: int | None,
        queue: str | None,
        jobs: Iterable[Traced | None],
    ) -> None:
        """The span of `operation` on `jobs` (of `queue`, if one; None: a job without a
        trace context), from `started` to now, linked once to each distinct trace
        context they carry."""
        if self._tracer is None or started is None:
            return
        contexts: dict[str, str | None] = {}
        count = 0
        for job in jobs:
            count += 1
            if job is not None and job.traceparent is not None:
                contexts.setdefault(job.traceparent, job.tracestate)
        attributes: dict[str, str | int] = {"jobq.jobs": count}
        if queue is not None:
            attributes["jobq.queue"] = queue
        span = self._tracer.start_span(
            SPAN_NAMES[operation],
            start_time=started,
            links=[link_to(parent, state) for parent, state in contexts.items()],
            attributes=attributes,
        )
        span.end()

    def finished(
        self, started: int | None, jobs: Sequence[Traced], outcomes: Sequence[str]
    ) -> None:
        """The spans of finishing `jobs`: one `complete`, one `fail` (`outcomes[i]` is
        `jobs[i]`'s), each when it has jobs."""
        if self._tracer is None or started is None:
            return
        for operation in ("complete", "fail"):
            of = [job for job, o in zip(jobs, outcomes, strict=True) if o == operation]
            if of:
                self.record(operation, started, None, of)
