"""`python -m bench --quick` runs end to end against the test server and reports every figure.

This checks that the benchmark works, not how fast jobq is: no timing assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import calls
from bench.soak import BOUNDS, JUDGED, REFERENCE_BOUNDS, RELATIVE_BOUNDS
from tests.conftest import _drop

REPO = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT_SECONDS = 100


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


def _run(database_url: str, name: str, module: str, timeout: float, *args: str) -> str:
    """Run `python -m MODULE ARGS` on a database of its own, `name`; what it printed."""
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url}
    try:
        run = subprocess.run(
            [sys.executable, "-m", module, *args, "--database-name", name],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        asyncio.run(_drop(database_url, name))
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def _bench(database_url: str, output: Path, *args: str) -> str:
    """Run `python -m bench ARGS` on a database of its own; its printed report."""
    return _run(
        database_url, BENCH_DATABASE, "bench", BENCH_TIMEOUT_SECONDS, *args, "--json", str(output)
    )


# The benchmark runs on the server it is given, the same code whichever mode the suite
# runs in: in CI, in the embedded run only (the server run has bench.pg_calls and lint).
@pytest.mark.once("embedded")
def test_quick_benchmark_reports_every_section(database_url: str, tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    printed = _bench(database_url, output, "--quick")
    assert "Targets" in printed  # the readable table
    for title in ("Drain back to back", "Single-job path back to back", "Enqueue-to-lease back"):
        assert title in printed  # the paired rounds' tables

    report = json.loads(output.read_text())
    assert report["database"]["database"] == BENCH_DATABASE
    assert report["database"]["version"]
    _positive(report["machine"], "cores", "memory_gib")
    assert report["service"]["exit_code"] == 0  # stopped cleanly with SIGTERM

    scenarios = report["scenarios"]
    assert set(scenarios) == {
        "bare",
        "batch_enqueue",
        "drain",
        "limited",
        "single",
        "enqueue_to_lease",
        "lease_latency",
        "dashboard",
        "floor",
        "paired",
    }
    for key in ("batch_enqueue", "drain", "single"):
        _positive(scenarios[key], "jobs", "seconds", "jobs_per_s")
        _cpu_reported(scenarios[key]["cpu"])
    single = scenarios["single"]  # enqueue, lease (again when it came back empty), complete
    assert single["calls"] == 3 * single["jobs"] + single["empty_leases"]
    # a second replica serving nothing meanwhile: its CPU, metered (clock ticks: maybe 0)
    assert isinstance(single["idle_replica_us_per_job"], int | float)
    assert single["idle_replica_us_per_job"] >= 0
    for key in (
        "batch",
        "batch_with_finish",
        "jobq_sql_batch",
        "wide_batch",
        "single",
        "single_with_finish",
        "single_with_insert",
    ):
        _positive(scenarios["bare"][key], "jobs", "seconds", "jobs_per_s")
        _cpu_reported(scenarios["bare"][key]["cpu"])

    # the limited queue's drain: never above its limit, and near it while jobs were queued
    limited = scenarios["limited"]
    _positive(limited, "jobs", "seconds", "jobs_per_s", "of_limit_rate", "samples")
    assert limited["running_max"] <= limited["max_running"]
    assert 0 < limited["kept_full"] <= 1, limited  # how full: a figure, not a test
    _cpu_reported(limited["cpu"])

    # the same loads against FastAPI + one bare statement per call, every job done
    for key in ("batch_enqueue", "drain", "single"):
        _positive(scenarios["floor"][key], "jobs", "seconds", "jobs_per_s")
        _cpu_reported(scenarios["floor"][key]["cpu"])
    assert scenarios["floor"]["batch_enqueue"]["jobs"] == scenarios["batch_enqueue"]["jobs"]
    assert scenarios["floor"]["drain"]["jobs"] == scenarios["drain"]["jobs"]
    assert scenarios["floor"]["single"]["jobs"] == scenarios["single"]["jobs"]
    # ... and against the floor answering whole jobs, as jobq does: every job done
    for key in ("drain", "single"):
        whole = scenarios["floor"]["whole"][key]
        _positive(whole, "jobs", "seconds", "jobs_per_s")
        _cpu_reported(whole["cpu"])
        assert whole["jobs"] == scenarios[key]["jobs"]
    floor_wait = scenarios["floor"]["enqueue_to_lease"]  # the floor long-polls too
    _positive(floor_wait, "count", "p50_ms", "p99_ms")
    assert floor_wait["count"] == scenarios["enqueue_to_lease"]["count"]

    # jobq's and both floors' loads back to back: one round in --quick; the drain and the
    # single-job path through all three, every job done (checked by the run)
    paired = scenarios["paired"]
    (only,) = paired["rounds"]
    for load in ("drain", "single"):
        figures = only[load]
        assert sorted(figures["order"]) == ["floor", "jobq", "whole"]
        for leg in ("jobq", "floor", "whole"):
            _positive(figures, leg)
            _cpu_reported(figures["cpu"][leg])
        jobq, floor, whole = figures["jobq"], figures["floor"], figures["whole"]
        assert figures["vs_floor"] == pytest.approx(jobq / floor, rel=1e-3)
        assert figures["vs_floor_whole"] == pytest.approx(jobq / whole, rel=1e-3)
        assert figures["floor_whole_vs_floor"] == pytest.approx(whole / floor, rel=1e-3)
        medians = paired["median"][load]
        assert medians == {key: figures[key] for key in medians}
        assert set(medians) == {"jobq", "floor", "whole", "vs_floor", "vs_floor_whole",
                                "floor_whole_vs_floor"}  # fmt: skip
    # ... then enqueue-to-lease through jobq and the floor, as many jobs as `latency`
    wait = only["wait"]
    assert sorted(wait["order"]) == ["floor", "jobq"]
    for leg in ("jobq", "floor"):
        _positive(wait[leg], "count", "p50_ms", "p99_ms")
        assert wait[leg]["count"] == paired["latency_samples"]
    p50s = wait["jobq"]["p50_ms"], wait["floor"]["p50_ms"]
    assert wait["p50_vs_floor"] == pytest.approx(p50s[0] / p50s[1], rel=1e-3)
    assert paired["median"]["wait"] == {k: wait[k] for k in ("p50_vs_floor", "p99_vs_floor")}

    waited = scenarios["enqueue_to_lease"]
    _positive(waited, "count", "p50_ms", "p95_ms", "p99_ms")
    _cpu_reported(waited["cpu"])
    # its bare reference in the same run: as many samples, the durable insert within each
    bare = waited["bare"]
    _positive(bare, "count", "p50_ms", "p99_ms")
    assert bare["count"] == waited["count"]
    assert 0 < bare["insert_commit"]["p50_ms"] <= bare["p50_ms"]

    leases = scenarios["lease_latency"]
    assert [level["finished_rows"] for level in leases["levels"]] == [0, 20_000]
    for level in leases["levels"]:
        _positive(level, "count", "p50_ms", "p95_ms")
        _cpu_reported(level["cpu"])
    assert leases["levels"][1]["rows_in_table"] >= 20_000
    _positive(leases, "ratio_p50")

    dashboard = scenarios["dashboard"]
    assert dashboard["rows"] == 20_000
    for page in ("queues_page", "queue_page", "jobs_filtered", "jobs_next_page"):
        _positive(dashboard[page], "count", "p50_ms", "p95_ms")

    _positive(
        report["comparison"],
        "drain_vs_bare_batch",
        "drain_vs_bare_batch_with_finish",
        "drain_vs_jobq_sql_batch",
        "single_vs_bare_single",
        "single_vs_bare_single_with_insert",
        "batch_enqueue_vs_floor",
        "drain_vs_floor_drain",
        "single_vs_floor_single",
        "floor_whole_vs_floor_drain",
        "floor_whole_vs_floor_single",
        "drain_vs_floor_whole_drain",
        "single_vs_floor_whole_single",
        "sql_postgres_cpu_vs_bare",
        "wide_postgres_cpu_vs_bare",
        "sql_postgres_cpu_vs_wide",
    )
    targets = {t["key"]: t for t in report["targets"]}
    measured = {
        "drain_vs_floor",
        "single_vs_floor",
        "drain_vs_floor_whole",
        "single_vs_floor_whole",
        "sql_postgres_cpu_vs_bare",
        "sql_postgres_cpu_vs_wide",
        "drain",
        "batch_enqueue",
        "wait_latency_p50",
        "wait_latency_p50_vs_floor",
        "wait_latency_p99",
        "dashboard_queue_page_p50",
        "lease_latency_ratio",
        "idle_replica_share",
    }
    assert set(targets) == measured | {f"soak_{bound.key}" for bound in JUDGED}
    for key in measured:
        target = targets[key]
        assert isinstance(target["measured"], int | float), target
        assert target["measured"] > 0 or key == "idle_replica_share", target
        assert isinstance(target["pass"], bool), target
    assert targets["idle_replica_share"]["measured"] == round(
        single["idle_replica_us_per_job"] / single["cpu"]["service_us_per_job"] * 100, 2
    )
    assert all(targets[key]["pass"] is None for key in set(targets) - measured)  # no soak
    # the targets against the floors are judged on the rounds run back to back
    median = paired["median"]
    for key, (load, ratio) in {
        "drain_vs_floor": ("drain", "vs_floor"),
        "drain_vs_floor_whole": ("drain", "vs_floor_whole"),
        "single_vs_floor": ("single", "vs_floor"),
        "single_vs_floor_whole": ("single", "vs_floor_whole"),
        "wait_latency_p50_vs_floor": ("wait", "p50_vs_floor"),
    }.items():
        assert targets[key]["measured"] == median[load][ratio], key


@pytest.mark.once("embedded")  # as the quick benchmark
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
    # each job sent when due, over several connections: none a second behind the rate
    assert soak["late_enqueues"] == 0
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
    assert reference["late_enqueues"] == 0
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


CALLS_TIMEOUT_SECONDS = 300
CALLS_LINE = re.compile(
    r"jobq +([\d,]+) instructions per call(?: \(([\d,]+) I1 misses, ([\d,]+) D1 misses\))?\n"
)


# Under Valgrind, with the other database mode's suite beside it on two cores, these
# take longer than the suite's default timeout; the subprocess's own timeout governs.
@pytest.mark.once("embedded")
@pytest.mark.timeout(CALLS_TIMEOUT_SECONDS + 30)
@pytest.mark.parametrize("through", [("--cache",), ("--http",)], ids=["in-process", "http"])
def test_calls_counts_the_instructions_of_a_call(
    database_url: str, through: tuple[str, ...]
) -> None:
    # in-process, with the caches simulated; --http: `jobq serve` under Valgrind, driven
    # through a socket from the script
    name = f"jobq_bench_calls_test_{os.getpid()}"
    arguments = ("--app", "jobq", "--loops", "8", *through)
    printed = _run(database_url, name, "bench.calls", CALLS_TIMEOUT_SECONDS, *arguments)
    counted = CALLS_LINE.fullmatch(printed)
    assert counted, printed
    instructions, i1, d1 = (int(n.replace(",", "")) if n else None for n in counted.groups())
    # enqueue, lease and complete through FastAPI, jobq and asyncpg: far from nothing,
    # and (only the counted loops, not the start-up's 3.5G) far from a whole process
    assert instructions is not None and 100_000 < instructions < 10_000_000
    if through == ("--cache",):  # some misses, far fewer than the instructions
        assert i1 is not None and 0 < i1 < instructions // 10
        assert d1 is not None and 0 < d1 < instructions // 10
    else:
        assert i1 is None and d1 is None


def test_calls_reads_a_callgrind_dump_whose_costs_end_in_zeros() -> None:
    # callgrind leaves out a cost line's trailing zeros (no last-level misses here)
    dump = (
        "version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 900 300 100 9 5 2\n"
    )
    assert calls.counts(dump, cache=True) == {
        "instructions": 900,
        "I1 misses": 9,
        "D1 misses": 7,
    }
    assert calls.counts("events: Ir\nsummary: 42\n", cache=False) == {"instructions": 42}
    with pytest.raises(SystemExit, match="not a callgrind dump"):
        calls.counts("events: Ir\n", cache=False)


PG_CALLS_TIMEOUT_SECONDS = 600
PG_CALLS_LINE = re.compile(r"^(single|batch) +(\S.*?) +([\d,]+) +([\d.]+) x bare$", re.MULTILINE)


@pytest.mark.once("server")  # the two bench.calls runs above are the embedded run's
@pytest.mark.timeout(PG_CALLS_TIMEOUT_SECONDS + 30)
def test_pg_calls_counts_postgresql_instructions_per_job() -> None:
    # a PostgreSQL of its own under Valgrind, whatever JOBQ_DATABASE_URL says
    run = subprocess.run(
        # a small table (2,000 queued jobs, not 50,000): PostgreSQL fills it under
        # Valgrind before each run, and plans the bare claim otherwise (a whole-table
        # read), which leaves the order below as it is
        [
            *(sys.executable, "-m", "bench.pg_calls", "--loops", "8", "--statements"),
            *("--queued", "2000", "--finished", "1000"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PG_CALLS_TIMEOUT_SECONDS,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    found = {
        (p, name): int(n.replace(",", "")) for p, name, n, _ in PG_CALLS_LINE.findall(run.stdout)
    }
    assert set(found) == {
        *(("single", name) for name in ("jobq", "whole floor", "bare")),
        *(("batch", name) for name in ("jobq", "minimal, jobq's row", "bare")),
    }, run.stdout
    # jobq's statements do more than the floor's on the same row, which do more than
    # the bare ones on the minimal table
    for path, reference in (("single", "whole floor"), ("batch", "minimal, jobq's row")):
        assert found[path, "jobq"] > found[path, reference] > found[path, "bare"] > 10_000
    # --statements: the single job's three statements, which add up to the whole
    statements = dict(re.findall(r"^single  jobq's (\w+) +([\d,]+) a call$", run.stdout, re.M))
    assert set(statements) == {"enqueue", "lease", "complete"}, run.stdout
    each = [int(n.replace(",", "")) for n in statements.values()]
    assert min(each) > 10_000
    assert abs(sum(each) - found["single", "jobq"]) < 0.05 * found["single", "jobq"], run.stdout
