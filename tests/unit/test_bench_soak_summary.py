"""The soak's summary: early against late after the warm-up, and jobq's latency against
the framework floor's over the same seconds, which takes the machine's drift out."""

from __future__ import annotations

from typing import Any

import pytest

from bench.soak import summarize

SAMPLES = 30  # the first 6 are the warm-up; then early = 6..13, late = 22..29


def _samples(jobq_ms: list[float], floor_ms: list[float]) -> list[dict[str, Any]]:
    return [
        {
            "table_mb": 9.0,
            "index_mb": 1.8,
            "dead_tuples": 1000,
            "rss_mb": 300.0,
            "latency_p50_ms": jobq,
            "latency_p99_ms": jobq * 3,
            "floor_latency_p50_ms": floor,
            "floor_latency_p99_ms": floor * 3,
        }
        for jobq, floor in zip(jobq_ms, floor_ms, strict=True)
    ]


def _slower_from(sample: int, before: float, after: float) -> list[float]:
    return [before if n < sample else after for n in range(SAMPLES)]


def test_a_machine_slowing_down_slows_both_and_jobq_stays_flat_against_the_floor() -> None:
    # the machine halves its speed two thirds in: both latencies double
    summary = summarize(
        _samples(_slower_from(20, 6.0, 12.0), _slower_from(20, 4.0, 8.0)), reference=True
    )
    p50 = summary["latency_p50_ms"]
    assert (p50["early"], p50["late"], p50["late_vs_early"], p50["flat"]) == (6, 12, 2, False)
    assert summary["floor_latency_p50_ms"]["late_vs_early"] == 2
    relative = summary["latency_p50_vs_floor"]
    assert (relative["early"], relative["late"]) == (1.5, 1.5)  # jobq / the floor
    assert relative["late_vs_early"] == 1 and relative["flat"] is True
    assert summary["latency_p99_vs_floor"]["flat"] is True


def test_a_climb_of_jobq_alone_shows_against_the_floor() -> None:
    summary = summarize(
        _samples(_slower_from(20, 6.0, 9.0), _slower_from(20, 4.0, 4.0)), reference=True
    )
    relative = summary["latency_p50_vs_floor"]
    assert relative["late_vs_early"] == pytest.approx(1.5)
    assert relative["flat"] is False


def test_without_the_reference_only_jobqs_own_figures() -> None:
    summary = summarize(_samples([6.0] * SAMPLES, [4.0] * SAMPLES))
    assert set(summary) == {
        "table_mb", "index_mb", "dead_tuples", "latency_p50_ms", "latency_p99_ms", "rss_mb",
    }  # fmt: skip
    assert all(figure["flat"] for figure in summary.values())
