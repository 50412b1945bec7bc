"""The queue core's telemetry: a batch's spans land in the histograms as if each job's
had been observed on its own, per queue, a stepped-back clock counting 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from app.core import metrics
from app.jobs import telemetry
from app.jobs.rows import FinishedBrief
from tests.metrics_support import parse

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _brief(job_id: int, queue: str, attempted: datetime | None, updated: datetime) -> FinishedBrief:
    return FinishedBrief(
        job_id, job_id, queue, "succeeded", 1, attempted, updated, None, None, None
    )


def _samples(registry: CollectorRegistry, name: str) -> list[tuple[str, dict[str, str], float]]:
    family = parse(generate_latest(registry).decode())[name]
    return [(s.name[len(name) :], s.labels, s.value) for s in family.samples]


def test_a_batch_over_two_queues_is_observed_as_each_row_on_its_own() -> None:
    rows = [
        _brief(1, "mail", T0, T0 + timedelta(seconds=0.3)),
        _brief(2, "mail", T0, T0 + timedelta(seconds=0.005)),  # on a bucket's bound
        _brief(3, "pdf", T0, T0 + timedelta(seconds=61)),
        _brief(4, "mail", T0, T0 - timedelta(seconds=2)),  # the clock stepped back
        _brief(5, "pdf", None, T0),  # never attempted: not observed
        _brief(6, "pdf", T0, T0 + timedelta(microseconds=1)),
    ]
    registry = CollectorRegistry()
    batch = Histogram(
        "batch", "b", ["queue"], buckets=metrics.JOB_SECONDS_BUCKETS, registry=registry
    )
    each = Histogram("each", "e", ["queue"], buckets=metrics.JOB_SECONDS_BUCKETS, registry=registry)
    for row in rows:
        if row.attempted_at is not None:
            span = (row.updated_at - row.attempted_at).total_seconds()
            each.labels(row.queue).observe(max(span, 0))
    queues = {row.queue for row in rows}
    telemetry._observe(batch, rows, telemetry._UPDATED, telemetry._ATTEMPTED, queues)
    assert _samples(registry, "batch") == _samples(registry, "each")
    counts = {s[1]["queue"]: s[2] for s in _samples(registry, "batch") if s[0] == "_count"}
    assert counts == {"mail": 3, "pdf": 2}


def test_a_batch_of_one_queue_clamps_a_stepped_back_clock_to_zero() -> None:
    registry = CollectorRegistry()
    batch = Histogram("batch", "b", ["queue"], buckets=[0.5, 1], registry=registry)
    rows = [
        _brief(1, "q", T0, T0 - timedelta(seconds=5)),
        _brief(2, "q", T0, T0 + timedelta(seconds=1)),
    ]
    telemetry._observe(batch, rows, telemetry._UPDATED, telemetry._ATTEMPTED, ("q",))
    found = {(s[0], s[1].get("le")): s[2] for s in _samples(registry, "batch")}
    assert found[("_sum", None)] == 1.0
    assert found[("_bucket", "0.5")] == 1 and found[("_bucket", "1.0")] == 2
