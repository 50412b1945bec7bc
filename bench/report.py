"""The issue's targets, judged; the report as rich tables."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.soak import JUDGED, render_soak


@dataclass(frozen=True)
class Target:
    key: str
    description: str
    op: str  # ">=" or "<="
    value: float
    unit: str
    measured: Callable[[dict[str, Any]], float | None]


def _get(*path: str) -> Callable[[dict[str, Any]], float | None]:
    def read(scenarios: dict[str, Any]) -> float | None:
        node: Any = scenarios
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, int | float) else None

    return read


def _ratio(
    numerator: Callable[[dict[str, Any]], float | None],
    denominator: Callable[[dict[str, Any]], float | None],
    *,
    percent: bool = False,
) -> Callable[[dict[str, Any]], float | None]:
    def read(scenarios: dict[str, Any]) -> float | None:
        top, bottom = numerator(scenarios), denominator(scenarios)
        if top is None or not bottom:
            return None
        return round(top / bottom * 100, 2) if percent else round(top / bottom, 3)

    return read


def _first(
    *reads: Callable[[dict[str, Any]], float | None],
) -> Callable[[dict[str, Any]], float | None]:
    """The first of `reads` that was measured."""

    def read(scenarios: dict[str, Any]) -> float | None:
        return next((v for v in (r(scenarios) for r in reads) if v is not None), None)

    return read


def postgres_us(loop: str) -> Callable[[dict[str, Any]], float | None]:
    """PostgreSQL's CPU per job in one of the bare loops."""
    return _get("bare", loop, "cpu", "postgres_us_per_job")


def _soak(key: str) -> Callable[[dict[str, Any]], float | None]:
    return _get("soak", "summary", key, "late_vs_early")


TARGETS = [
    Target(
        "drain_vs_floor",
        "drain (lease 100 + one /v1/acks call): jobq / framework floor, back to back",
        ">=",
        0.8,
        "x",
        _first(
            _get("paired", "median", "drain", "vs_floor"),
            _ratio(_get("drain", "jobs_per_s"), _get("floor", "drain", "jobs_per_s")),
        ),
    ),
    Target(
        "single_vs_floor",
        "single-job path (enqueue, lease, complete): jobq / framework floor, back to back",
        ">=",
        0.9,
        "x",
        # the median of the rounds run back to back, else the two loads run apart
        _first(
            _get("paired", "median", "single", "vs_floor"),
            _ratio(_get("single", "jobs_per_s"), _get("floor", "single", "jobs_per_s")),
        ),
    ),
    Target(
        "drain_vs_floor_whole",
        "drain: jobq / the floor answering whole jobs as jobq does, back to back",
        ">=",
        0.8,
        "x",
        _first(
            _get("paired", "median", "drain", "vs_floor_whole"),
            _ratio(_get("drain", "jobs_per_s"), _get("floor", "whole", "drain", "jobs_per_s")),
        ),
    ),
    Target(
        "single_vs_floor_whole",
        "single-job path: jobq / the floor answering whole jobs as jobq does, back to back",
        ">=",
        0.9,
        "x",
        _first(
            _get("paired", "median", "single", "vs_floor_whole"),
            _ratio(_get("single", "jobs_per_s"), _get("floor", "whole", "single", "jobs_per_s")),
        ),
    ),
    Target(
        "idle_replica_share",
        "single-job path: an idle replica's CPU per job, % of the serving processes'",
        "<=",
        2,
        "%",
        _ratio(
            _get("single", "idle_replica_us_per_job"),
            _get("single", "cpu", "service_us_per_job"),
            percent=True,
        ),
    ),
    Target(
        "sql_postgres_cpu_vs_bare",
        "PostgreSQL CPU per job: jobq's LEASE 100 + FINISH / bare claim 100 + finish",
        "<=",
        1.5,
        "x",
        _ratio(postgres_us("jobq_sql_batch"), postgres_us("batch_with_finish")),
    ),
    Target(
        "sql_postgres_cpu_vs_wide",
        "PostgreSQL CPU per job: jobq's LEASE 100 + FINISH / the minimal ones on jobq's row",
        "<=",
        1.3,
        "x",
        _ratio(postgres_us("jobq_sql_batch"), postgres_us("wide_batch")),
    ),
    Target(
        "wait_latency_p50",
        "enqueue-to-lease latency with workers waiting, p50",
        "<=",
        2,
        "ms",
        _get("enqueue_to_lease", "p50_ms"),
    ),
    Target(
        "wait_latency_p50_vs_floor",
        "enqueue-to-lease p50: jobq / framework floor (the same calls, LISTEN), back to back",
        "<=",
        1.2,
        "x",
        _first(
            _get("paired", "median", "wait", "p50_vs_floor"),
            _ratio(_get("enqueue_to_lease", "p50_ms"), _get("floor", "enqueue_to_lease", "p50_ms")),
        ),
    ),
    Target(
        "wait_latency_p99",
        "enqueue-to-lease latency with workers waiting, p99",
        "<=",
        10,
        "ms",
        _get("enqueue_to_lease", "p99_ms"),
    ),
    Target(
        "batch_enqueue",
        "batch enqueue through HTTP",
        ">=",
        30_000,
        "jobs/s",
        _get("batch_enqueue", "jobs_per_s"),
    ),
    Target(
        "drain",
        "batched drain through HTTP",
        ">=",
        15_000,
        "jobs/s",
        _get("drain", "jobs_per_s"),
    ),
    Target(
        "dashboard_queue_page_p50",
        "a queue's dashboard page (its 4 API calls, one after another), p50",
        "<=",
        300,
        "ms",
        _get("dashboard", "queue_page", "p50_ms"),
    ),
    Target(
        "lease_latency_ratio",
        "lease latency p50 at the most finished rows / on an empty table",
        "<=",
        1.5,
        "x",
        _get("lease_latency", "ratio_p50"),
    ),
    *(
        Target(
            f"soak_{bound.key}",
            f"soak: {bound.what}, late / early after warm-up",
            "<=",
            bound.most,
            "x",
            _soak(bound.key),
        )
        for bound in JUDGED
    ),
]

_OPS = {">=": operator.ge, "<=": operator.le}


def judge(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with what was measured and whether it passes (None: not measured)."""
    judged = []
    for target in TARGETS:
        measured = target.measured(scenarios)
        judged.append(
            {
                "key": target.key,
                "description": target.description,
                "target": f"{target.op} {target.value:g} {target.unit}",
                "op": target.op,
                "value": target.value,
                "unit": target.unit,
                "measured": measured,
                "pass": None if measured is None else bool(_OPS[target.op](measured, target.value)),
            }
        )
    return judged


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and abs(value) < 10 and digits == 1:
        return f"{value:,.2f}"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _verdict(passed: bool | None) -> str:
    return {True: "[green]pass[/]", False: "[red]FAIL[/]", None: "[dim]not run[/]"}[passed]


def _round_columns(table: Table, *figures: str) -> None:
    """A round's label and order, left; its figures, right."""
    table.add_column("round")
    table.add_column("order")
    for column in figures:
        table.add_column(column, justify="right")


def _render_paired(paired: dict[str, Any] | None, console: Console) -> None:
    """The loads back to back: each round's figures and ratios, and the medians."""
    if not paired:
        return
    loads = (
        ("drain", f"Drain back to back ({paired['drain_jobs']:,} jobs a load, "
                  f"{paired['drain_workers']} workers): jobs/s"),
        ("single", f"Single-job path back to back ({paired['single_jobs']:,} jobs a load, "
                   f"{paired['single_concurrency']} loops): jobs/s"),
    )  # fmt: skip
    for load, title in loads:
        table = Table(title=title)
        _round_columns(table, "jobq", "floor", "whole-job floor", "jobq/floor", "jobq/whole",
                       "whole/floor")  # fmt: skip
        rows = [(str(n), r[load]) for n, r in enumerate(paired["rounds"], 1)]
        for label, r in [*rows, ("median", {**paired["median"][load], "order": []})]:
            table.add_row(
                label,
                ", ".join(r["order"]),
                *(_num(r[leg], 0) for leg in ("jobq", "floor", "whole")),
                *(_num(r[k], 3) for k in ("vs_floor", "vs_floor_whole", "floor_whole_vs_floor")),
            )
        console.print(table)
    waits = Table(
        title=f"Enqueue-to-lease back to back ({paired['latency_samples']:,} jobs a load): ms"
    )
    _round_columns(waits, "jobq p50", "floor p50", "p50 ratio", "jobq p99", "floor p99",
                   "p99 ratio")  # fmt: skip
    for n, r in enumerate(paired["rounds"], 1):
        wait = r["wait"]
        waits.add_row(
            str(n),
            ", ".join(wait["order"]),
            _num(wait["jobq"]["p50_ms"], 2),
            _num(wait["floor"]["p50_ms"], 2),
            _num(wait["p50_vs_floor"], 3),
            _num(wait["jobq"]["p99_ms"], 2),
            _num(wait["floor"]["p99_ms"], 2),
            _num(wait["p99_vs_floor"], 3),
        )
    median = paired["median"]["wait"]
    waits.add_row(
        "median", "", "", "", _num(median["p50_vs_floor"], 3), "", "",
        _num(median["p99_vs_floor"], 3),
    )  # fmt: skip
    console.print(waits)


def render(report: dict[str, Any], console: Console) -> None:
    machine, database, service = report["machine"], report["database"], report["service"]
    console.print(
        f"[bold]jobq benchmark[/] {report['started_at']}  "
        f"{machine['cores']} cores, {machine['memory_gib']} GiB, Python {machine['python']}, "
        f"PostgreSQL {database['version']} ({database['mode']}), "
        f"{service['workers']} service process(es), {report['config']['generators']} "
        f"generator process(es)"
    )
    if report.get("profiles"):
        console.print("[yellow]PROFILED with py-spy: the numbers are perturbed[/]")
    scenarios = report["scenarios"]

    targets = Table(title="Targets")
    for column in ("", "measured", "target", ""):
        targets.add_column(column, justify="right" if column else "left")
    for t in report["targets"]:
        digits = 0 if t["unit"] == "jobs/s" else 2
        measured = "-" if t["measured"] is None else f"{t['measured']:,.{digits}f} {t['unit']}"
        targets.add_row(t["description"], measured, t["target"], _verdict(t["pass"]))
    console.print(targets)

    throughput = Table(title="Throughput (jobs/s) and the bare SKIP LOCKED reference")
    for column in ("scenario", "jobs", "seconds", "jobs/s", "vs bare", "calls/s", "notes"):
        throughput.add_column(
            column, justify="left" if column in ("scenario", "notes") else "right"
        )
    comparison = report.get("comparison", {})
    rows = [
        ("batch enqueue (1000 per call)", "batch_enqueue", None, "requests"),
        ("drain (lease 100 + ack)", "drain", "drain_vs_bare_batch", "calls"),
        ("single (3 calls/job)", "single", "single_vs_bare_single", "calls"),
    ]
    for label, key, versus, calls_key in rows:
        s = scenarios.get(key)
        if s:
            calls = s.get(calls_key)
            throughput.add_row(
                label,
                _num(s["jobs"]),
                _num(s["seconds"], 2),
                _num(s["jobs_per_s"], 0),
                _num(comparison.get(versus), 3) if versus else "",
                _num(calls / s["seconds"], 0) if calls else "",
                s.get("note", ""),
            )
    enqueued, drained = scenarios.get("batch_enqueue"), scenarios.get("drain")
    if enqueued and drained:
        seconds = enqueued["seconds"] + drained["seconds"]
        throughput.add_row(
            "enqueue, then drain",
            _num(drained["jobs"]),
            _num(seconds, 2),
            _num(drained["enqueue_and_drain_jobs_per_s"], 0),
            "",
            "",
            "the two phases above, end to end",
        )

    limited = scenarios.get("limited")
    if limited:
        throughput.add_row(
            f"limited drain (max_running {limited['max_running']})",
            _num(limited["jobs"]),
            _num(limited["seconds"], 2),
            _num(limited["jobs_per_s"], 0),
            "",
            "",
            f"{limited['of_limit_rate']:.0%} of the limit's {limited['limit_jobs_per_s']:,.0f}"
            f" (jobs held {limited['hold_ms']:.0f} ms); running {limited['running_mean']} on"
            f" average, at most {limited['running_max']}",
        )

    def reference(label: str, s: dict[str, Any] | None, calls_per_s: str, note: str) -> None:
        if s:
            jobs, seconds, rate = _num(s["jobs"]), _num(s["seconds"], 2), _num(s["jobs_per_s"], 0)
            throughput.add_row(label, jobs, seconds, rate, "", calls_per_s, note)

    bare = scenarios.get("bare", {})
    for key, label, note in (
        ("batch", "bare: claim 100", "the reference for the drain"),
        ("batch_with_finish", "bare: claim 100 + finish", ""),
        ("jobq_sql_batch", "jobq SQL: LEASE 100 + FINISH", "jobq's statements, no HTTP"),
        ("wide_batch", "bare, jobq's row: claim 100 + finish", "minimal, fenced, whole rows"),
        ("single", "bare: claim 1", "the reference for single"),
        ("single_with_finish", "bare: claim 1 + finish", ""),
        ("single_with_insert", "bare: insert + claim 1 + finish", ""),
    ):
        s = bare.get(key)
        if s:
            reference(
                label,
                s,
                _num(s["statements"] / s["seconds"], 0),
                f"{s['connections']} asyncpg connections; {note}".rstrip("; "),
            )
    floor = scenarios.get("floor", {})
    for key, versus in (
        ("batch_enqueue", "batch_enqueue_vs_floor"),
        ("drain", "drain_vs_floor_drain"),
        ("single", "single_vs_floor_single"),
    ):
        reference(
            f"floor: {key.replace('_', ' ')}",
            floor.get(key),
            "",
            f"FastAPI + one bare statement per call; jobq/floor {_num(comparison.get(versus), 3)}",
        )
    whole = floor.get("whole", {})
    for key in ("drain", "single"):
        reference(
            f"floor, whole jobs: {key}",
            whole.get(key),
            "",
            "jobq's answers on a table like jobq's; floor/floor"
            f" {_num(comparison.get(f'floor_whole_vs_floor_{key}'), 3)},"
            f" jobq/this {_num(comparison.get(f'{key}_vs_floor_whole_{key}'), 3)}",
        )
    if throughput.row_count:
        console.print(throughput)
    _render_paired(scenarios.get("paired"), console)

    latency = Table(title="Latency (ms)")
    for column in ("what", "count", "p50", "p95", "p99", "mean", "max"):
        latency.add_column(column, justify="left" if column == "what" else "right")

    def row(label: str, summary: dict[str, Any]) -> None:
        latency.add_row(
            label,
            *(_num(summary[k], 2) if k != "count" else _num(summary[k]) for k in _LATENCY_KEYS),
        )

    wait = scenarios.get("enqueue_to_lease")
    if wait:
        row(f"enqueue-to-lease, {wait['waiting_workers']} workers long-polling", wait)
        row("  of which the enqueue call", wait["enqueue_request"])
        floor_wait = scenarios.get("floor", {}).get("enqueue_to_lease")
        if floor_wait:
            row("framework floor: the same calls, LISTEN", floor_wait)
            row("  of which the enqueue call", floor_wait["enqueue_request"])
        bare = wait.get("bare")
        if bare:
            row("bare: INSERT + NOTIFY -> LISTEN -> claim", bare)
            row("  of which the durable INSERT", bare["insert_commit"])
    for level in scenarios.get("lease_latency", {}).get("levels", []):
        row(f"lease 1 job, {level['finished_rows']:,} finished rows", level)
    dashboard = scenarios.get("dashboard")
    if dashboard:
        for page in ("queues_page", "queue_page", "jobs_filtered", "jobs_next_page"):
            row(f"dashboard {page.replace('_', ' ')}, {dashboard['rows']:,} rows", dashboard[page])
    if latency.row_count:
        console.print(latency)

    cpu = Table(title="CPU per job (µs) and cores busy on average")
    for column in (
        "scenario",
        "service µs",
        "postgres µs",
        "generator µs",
        "service cores",
        "pg cores",
        "gen cores",
        "other cores",
    ):
        cpu.add_column(column, justify="left" if column == "scenario" else "right")
    for label, c in _cpu_rows(scenarios):
        cpu.add_row(
            label,
            _num(c["service_us_per_job"]),
            _num(c["postgres_us_per_job"]),
            _num(c["generator_us_per_job"]),
            _num(c["service_cores"], 2),
            _num(c["postgres_cores"], 2),
            _num(c["generator_cores"], 2),
            _num(c["other_cores"], 2),
        )
    if cpu.row_count:
        console.print(cpu)
    if "soak" in scenarios:
        render_soak(scenarios["soak"], console)
    for name, profile in report.get("profiles", {}).items():
        _render_profile(name, profile, console)
    for note in report.get("notes", []):
        console.print(f"[yellow]note:[/] {note}")


_LATENCY_KEYS = ("count", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms")


def _cpu_rows(scenarios: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for key, label in (
        ("batch_enqueue", "batch enqueue"),
        ("drain", "drain"),
        ("single", "single"),
        ("enqueue_to_lease", "enqueue-to-lease"),
    ):
        if key in scenarios:
            rows.append((label, scenarios[key]["cpu"]))
    for level in scenarios.get("lease_latency", {}).get("levels", []):
        rows.append((f"lease @ {level['finished_rows']:,} finished", level["cpu"]))
    for key, label in (
        ("batch", "bare claim 100"),
        ("batch_with_finish", "bare claim 100 + finish"),
        ("jobq_sql_batch", "jobq SQL lease 100 + finish"),
        ("wide_batch", "bare on jobq's row, 100 + finish"),
        ("single", "bare claim 1"),
        ("single_with_finish", "bare claim 1 + finish"),
        ("single_with_insert", "bare insert + claim 1 + finish"),
    ):
        if key in scenarios.get("bare", {}):
            rows.append((label, scenarios["bare"][key]["cpu"]))
    for key in ("batch_enqueue", "drain", "single"):
        if key in scenarios.get("floor", {}):
            rows.append((f"floor {key}", scenarios["floor"][key]["cpu"]))
    for key in ("drain", "single"):
        if key in scenarios.get("floor", {}).get("whole", {}):
            rows.append((f"floor, whole jobs: {key}", scenarios["floor"]["whole"][key]["cpu"]))
    return rows


def _render_profile(name: str, profile: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Service profile during {name}: {profile['samples']:,} samples (py-spy)")
    table.add_column("where (phase)")
    table.add_column("%", justify="right")
    table.add_column("package (self)")
    table.add_column("%", justify="right")
    table.add_column("function (self)")
    table.add_column("%", justify="right")
    table.add_column("jobq function (inclusive)")
    table.add_column("%", justify="right")
    columns = (
        profile["phases"],
        profile["self_by_package"],
        profile["self"],
        profile["inclusive_jobq"],
    )
    for i in range(12):
        cells: list[str] = []
        keys = ("phase", "package", "function", "function")
        for rows, key in zip(columns, keys, strict=True):
            row = rows[i] if i < len(rows) else None
            cells += [row[key], f"{row['percent']:.1f}"] if row else ["", ""]
        table.add_row(*cells)
    console.print(table)
