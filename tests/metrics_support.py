"""Reading a Prometheus exposition back, for the metrics tests."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def parse(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Metric], sample: str, **labels: str) -> float:
    """A sample's value; 0 when the series does not exist (yet)."""
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    for s in families[family].samples if family in families else []:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return 0.0


def metrics_dirs(under: Path) -> set[str]:
    """The shared metrics folders a `jobq serve --workers N` run with `TMPDIR=under`
    made there and has not removed (its own temporary directory: another service on the
    machine, such as a test run beside this one, makes and removes its own)."""
    return {p.name for p in under.glob("jobq-metrics-*")}
