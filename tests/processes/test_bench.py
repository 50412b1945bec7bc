"""`python -m bench --quick` runs end to end against the test server and reports every figure.

This checks that the benchmark works, not how fast jobq is: no timing assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.report import TARGETS
from bench.soak import BOUNDS, JUDGED, REFERENCE_BOUNDS, RELATIVE_BOUNDS
from tests.conftest import _drop

REPO = Path(__file__).resolve().parents[2]
# generous: the machine it runs on may be busy with other work (no timing is asserted)
BENCH_TIMEOUT_SECONDS = 240


def _positive(node: dict[str, Any], *keys: str) -> None:
    for key in keys:
        value = node[key]
        assert isinstance(value, int | float) and value > 0, (key, value)


def _cpu_reported(cpu: dict[str, Any]) -> None:
    for key in ("service_us_per_job", "generator_us_per_job", "window_s"):
        assert isinstance(cpu[key], int | float) and cpu[key] >= 0, (key, cpu)
    # PostgreSQL's CPU is measured when the server runs on this machine, as in the tests
    assert isinstance(cpu["postgres_us_per_job"], int | float), cpu


BENCH_DATABASE = f"jobq_bench_test_{os.getpid()}"


def _bench(database_url: str, output: Path, *args: str) -> str:
    """Run `python -m bench ARGS` on a database of its own; its printed report.

    Past the timeout it is stopped with SIGTERM, as a user's Ctrl-C would, so that it
    stops the services it started.
    """
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url}
    command = [sys.executable, "-m", "bench", *args, "--json", str(output)]
    command += ["--database-name", BENCH_DATABASE]
    bench = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = bench.communicate(timeout=BENCH_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        bench.terminate()
        stdout, stderr = bench.communicate(timeout=60)
        pytest.fail(f"the benchmark took over {BENCH_TIMEOUT_SECONDS} s:\n{stdout}{stderr}")
    finally:
        asyncio.run(_drop(database_url, BENCH_DATABASE))
    assert bench.returncode == 0, stdout + stderr
    return stdout


# The benchmark runs on the server it is given, the same code whichever mode the suite
# runs in: in CI, the quick run in the embedded run and the soak in the server run.
@pytest.mark.once("embedded")
@pytest.mark.timeout(BENCH_TIMEOUT_SECONDS + 30)
def test_quick_benchmark_reports_every_section(database_url: str, tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    printed = _bench(database_url, output, "--quick")
    for title in (
        "Targets",
        "Throughput",
        "Drain back to back",
        "Single-job path back to back",
        "Enqueue-to-lease back",
        "Latency",
        "CPU per job",
    ):
        assert title in printed

    report = json.loads(output.read_text())
    assert report["database"]["database"] == BENCH_DATABASE
    assert report["database"]["version"]
    _positive(report["machine"], "cores", "memory_gib")
    assert report["service"]["exit_code"] == 0  # stopped cleanly with SIGTERM

    scenarios = report["scenarios"]
    assert set(scenarios) == {
        "batch_enqueue", "drain", "limited", "single", "enqueue_to_lease", "floor",
    }  # fmt: skip
    for key in ("batch_enqueue", "drain", "single"):
        _positive(scenarios[key], "jobs", "seconds", "jobs_per_s")
        _cpu_reported(scenarios[key]["cpu"])
    assert scenarios["batch_enqueue"]["requests"] == 2  # 2,000 jobs, 1,000 a call
    drain = scenarios["drain"]  # a lease and an ack call per 100 jobs, and the empty leases
    assert drain["calls"] >= 2 * drain["jobs"] // 100 + drain["empty_leases"]
    single = scenarios["single"]  # enqueue, lease (again when it came back empty), complete
    assert single["calls"] == 3 * single["jobs"] + single["empty_leases"]
    # a second replica serving nothing meanwhile: its CPU, metered (clock ticks: maybe 0)
    assert isinstance(single["idle_replica_us_per_job"], int | float)
    assert single["idle_replica_us_per_job"] >= 0

    # the limited queue's drain: never above its limit, and near it while jobs were queued
    limited = scenarios["limited"]
    _positive(limited, "jobs", "seconds", "jobs_per_s", "of_limit_rate", "samples")
    _positive(limited, "one_lease_ms", "bound_of_limit_rate")
    hold = limited["hold_ms"]
    bound = hold / (hold + limited["one_lease_ms"])
    assert limited["bound_of_limit_rate"] == pytest.approx(bound, abs=1e-3)
    assert limited["running_max"] <= limited["max_running"]
    assert 0 < limited["kept_full"] <= 1, limited  # how full: a figure, not a test
    _cpu_reported(limited["cpu"])

    waited = scenarios["enqueue_to_lease"]
    _positive(waited, "count", "p50_ms", "p95_ms", "p99_ms")
    assert waited["count"] == report["config"]["latency_samples"]
    _cpu_reported(waited["cpu"])

    # jobq's and the floor's loads back to back: one round in --quick; the drain and the
    # single-job path through both, every job done (checked by the run)
    floor = scenarios["floor"]
    (only,) = floor["rounds"]
    for load in ("drain", "single"):
        figures = only[load]
        assert sorted(figures["order"]) == ["floor", "jobq"]
        for leg in ("jobq", "floor"):
            _positive(figures, leg)
            _cpu_reported(figures["cpu"][leg])
        jobq, reference = figures["jobq"], figures["floor"]
        assert figures["vs_floor"] == pytest.approx(jobq / reference, rel=1e-3)
        assert floor["median"][load] == {k: figures[k] for k in ("jobq", "floor", "vs_floor")}
    # ... then enqueue-to-lease through jobq and the floor, as many jobs as `latency`
    wait = only["wait"]
    assert sorted(wait["order"]) == ["floor", "jobq"]
    for leg in ("jobq", "floor"):
        _positive(wait[leg], "count", "p50_ms", "p99_ms")
        assert wait[leg]["count"] == floor["latency_samples"] == waited["count"]
    p50s = wait["jobq"]["p50_ms"], wait["floor"]["p50_ms"]
    assert wait["p50_vs_floor"] == pytest.approx(p50s[0] / p50s[1], rel=1e-3)
    assert floor["median"]["wait"] == {k: wait[k] for k in ("p50_vs_floor", "p99_vs_floor")}

    targets = {t["key"]: t for t in report["targets"]}
    measured = {
        "drain_vs_floor",
        "single_vs_floor",
        "wait_latency_p50_vs_floor",
        "idle_replica_share",
        "wait_latency_p50",
        "wait_latency_p99",
        "batch_enqueue",
        "drain",
        "limited_of_limit",
        "limited_bound",
    }
    # every target is reported; those of the scenarios a quick run leaves out (soak, fair,
    # prune, scale) unjudged
    assert set(targets) == {target.key for target in TARGETS}
    assert measured <= set(targets)
    for key in measured:
        target = targets[key]
        assert isinstance(target["measured"], int | float), target
        assert target["measured"] > 0 or key == "idle_replica_share", target
        assert isinstance(target["pass"], bool), target
    idle_share = single["idle_replica_us_per_job"] / single["cpu"]["service_us_per_job"] * 100
    assert targets["idle_replica_share"]["measured"] == pytest.approx(idle_share, abs=1e-3)
    assert all(targets[key]["pass"] is None for key in set(targets) - measured)  # no soak
    # the targets against the floor are judged on the rounds run back to back
    for key, (load, ratio) in {
        "drain_vs_floor": ("drain", "vs_floor"),
        "single_vs_floor": ("single", "vs_floor"),
        "wait_latency_p50_vs_floor": ("wait", "p50_vs_floor"),
    }.items():
        assert targets[key]["measured"] == floor["median"][load][ratio], key
    assert targets["drain"]["measured"] == drain["jobs_per_s"]
    assert targets["wait_latency_p99"]["measured"] == waited["p99_ms"]


@pytest.mark.once("server")  # the quick benchmark is the embedded run's
@pytest.mark.timeout(BENCH_TIMEOUT_SECONDS + 30)
def test_the_soak_samples_sizes_latency_and_memory(database_url: str, tmp_path: Path) -> None:
    output = tmp_path / "soak.json"
    printed = _bench(
        database_url, output, "--soak", "0.25", "--soak-rate", "100", "--soak-fail-every", "5"
    )
    assert "Soak after warm-up" in printed

    report = json.loads(output.read_text())
    assert set(report["scenarios"]) == {"soak"}  # alone, with no --only
    soak = report["scenarios"]["soak"]
    assert soak["enqueued"] == 1500  # 100 jobs/s for 15 s
    # jobs sent over a second after they were due: a figure of the machine's load, not a
    # test (tests/unit/test_bench_soak_load.py holds the producer to its rate)
    assert 0 <= soak["late_enqueues"] <= soak["enqueued"]
    assert 0 < soak["leased"] <= soak["enqueued"] + soak["failed_once"]
    assert soak["failed_once"] > 0  # 1 in 5 failed once, to be leased again
    samples = soak["samples"]
    assert len(samples) >= 8  # every 1.5 s
    assert [s["t_s"] for s in samples] == sorted(s["t_s"] for s in samples)
    # the summary compares the samples of the steady phase only, not its workers' stop
    steady = soak["steady_samples"]
    assert 8 <= steady <= len(samples)
    assert all(s["wall"] <= soak["steady_until"] for s in samples[:steady])
    assert all(s["wall"] > soak["steady_until"] for s in samples[steady:])
    for sample in samples:
        _positive(sample, "table_mb", "index_mb", "rss_mb")
        assert sample["dead_tuples"] >= 0 and sample["live_tuples"] >= 0
    assert sum(s["leased"] for s in samples) > 0
    assert any(s["latency_p99_ms"] for s in samples)
    # beside it, the framework floor's load at 50 jobs/s (the default), sampled alike
    reference = soak["reference"]
    assert reference["rate_per_s"] == 50 and reference["enqueued"] == 750
    assert 0 < reference["leased"] <= reference["enqueued"]
    assert 0 <= reference["late_enqueues"] <= reference["enqueued"]
    # (jobs leased after the last sample are in no window: at most all of them)
    assert 0 < sum(s["floor_leased"] for s in samples) <= reference["leased"]
    assert any(s["floor_latency_p99_ms"] for s in samples)
    summary = soak["summary"]
    every = (*BOUNDS, *REFERENCE_BOUNDS, *RELATIVE_BOUNDS)
    assert set(summary) == {bound.key for bound in every}
    for figure in summary.values():
        assert isinstance(figure["flat"], bool), figure
        assert figure["late_vs_early"] >= 0, figure
    for q in (50, 99):  # jobq's drift with the floor's taken out
        jobq, floor = summary[f"latency_p{q}_ms"], summary[f"floor_latency_p{q}_ms"]
        relative = summary[f"latency_p{q}_vs_floor"]["late_vs_early"]
        expected = jobq["late_vs_early"] / floor["late_vs_early"]
        assert relative == pytest.approx(expected, rel=0.01)
    soak_targets = {t["key"]: t for t in report["targets"] if t["key"].startswith("soak_")}
    assert set(soak_targets) == {f"soak_{bound.key}" for bound in JUDGED}
    assert all(isinstance(t["pass"], bool) for t in soak_targets.values())


@pytest.mark.once("embedded")
@pytest.mark.timeout(BENCH_TIMEOUT_SECONDS + 30)
def test_quick_push_benchmark_reports_its_figures(database_url: str, tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    printed = _bench(database_url, output, "--quick", "--only", "push")
    for title in ("Push: 1,000 deliveries a round", "Push latency"):
        assert title in printed

    report = json.loads(output.read_text())
    assert report["service"]["exit_code"] == 0
    # the main service delivers nothing: the push scenario's own replica does
    assert report["service"]["env"]["JOBQ_PUSH_CONCURRENCY"] == "0"
    push = report["scenarios"]["push"]
    assert set(report["scenarios"]) == {"push"}
    assert push["jobs"] == report["config"]["push_jobs"] == 1000
    (only,) = push["rounds"]  # every delivery arrived and every job succeeded: checked
    _positive(only, "push_per_s", "floor_per_s", "vs_floor")
    assert only["vs_floor"] == pytest.approx(only["push_per_s"] / only["floor_per_s"], rel=1e-3)
    assert push["median"] == only
    assert push["envelope_bytes"] > 100  # a delivery's envelope, as the floor sends it
    latency = push["latency"]
    _positive(latency, "p50_ms", "p95_ms")
    assert latency["count"] == report["config"]["push_latency_samples"]
    judged = {t["key"]: t["measured"] for t in report["targets"]}
    for key in ("push_vs_floor", "push_per_replica", "push_latency_p50"):
        assert judged[key] is not None, key
