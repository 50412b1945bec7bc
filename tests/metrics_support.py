"""Reading a Prometheus exposition back, for the metrics tests."""

from __future__ import annotations

import tempfile
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


def metrics_dirs() -> set[str]:
    """The shared metrics folders `jobq serve --workers N` made and has not removed."""
    return {p.name for p in Path(tempfile.gettempdir()).glob("jobq-metrics-*")}
