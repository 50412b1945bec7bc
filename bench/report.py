"""The targets, judged; the report as rich tables."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.soak import FLOOR, JUDGED, REFERENCE_BOUNDS


@dataclass(frozen=True)
class Target:
    key: str
    op: str  # ">=" or "<="
    value: float
    unit: str
    path: tuple[str, ...]  # where the figure is in the scenarios' results
    description: str

    def measured(self, scenarios: dict[str, Any]) -> float | None:
        node: Any = scenarios
        for key in self.path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, int | float) else None


TARGETS = [
    Target("drain_vs_floor", ">=", 0.8, "x", ("floor", "median", "drain", "vs_floor"),
           "drain (lease 100 + one /v1/acks call): jobq / framework floor, back to back"),
    Target("single_vs_floor", ">=", 0.9, "x", ("floor", "median", "single", "vs_floor"),
           "single-job path (enqueue, lease, complete): jobq / framework floor, back to back"),
    Target("wait_latency_p50_vs_floor", "<=", 1.2, "x",
           ("floor", "median", "wait", "p50_vs_floor"),
           "enqueue-to-lease p50: jobq / framework floor (the same calls, LISTEN), back to back"),
    Target("idle_replica_share", "<=", 2, "%", ("single", "idle_replica_percent"),
           "single-job path: an idle replica's CPU per job, % of the serving processes'"),
    Target("wait_latency_p50", "<=", 2, "ms", ("enqueue_to_lease", "p50_ms"),
           "enqueue-to-lease latency with workers waiting, p50"),
    Target("wait_latency_p99", "<=", 10, "ms", ("enqueue_to_lease", "p99_ms"),
           "enqueue-to-lease latency with workers waiting, p99"),
    Target("batch_enqueue", ">=", 30_000, "jobs/s", ("batch_enqueue", "jobs_per_s"),
           "batch enqueue through HTTP"),
    Target("drain", ">=", 15_000, "jobs/s", ("drain", "jobs_per_s"), "batched drain through HTTP"),
    Target("limited_of_limit", ">=", 0.95, "x", ("limited", "of_limit_rate"),
           "limited drain (max_running 50): jobs/s / the limit's (50 / the hold)"),
    Target("limited_bound", ">=", 0.95, "x", ("limited", "bound_of_limit_rate"),
           "limited: the most a slot allows, hold / (hold + one lease call's p50)"),
    Target("push_vs_floor", ">=", 0.7, "x", ("push", "median", "vs_floor"),
           "push: one replica's deliveries/s / a plain httpx client's, back to back"),
    Target("push_per_replica", ">=", 2000, "jobs/s", ("push", "median", "push_per_s"),
           "push: deliveries/s of one replica to a local endpoint answering 200"),
    Target("push_latency_p50", "<=", 10, "ms", ("push", "latency", "p50_ms"),
           "push: enqueue to delivery with the dispatcher idle, p50"),
    Target("fair_drain_vs_fifo", ">=", 0.8, "x", ("fair", "drain_vs_fifo"),
           "drain of a fair queue (10 keys) / a fifo queue's, back to back"),
    Target("fair_lease_cost_many_keys", "<=", 1.5, "x", ("fair", "lease_cost_many_vs_few_keys"),
           "fair drain's time per job with 10,000 keys / with 10"),
    Target("fair_flooded_p99", "<=", 2, "x", ("fair", "flooded_p99_vs_quiet"),
           "tenants B-K's enqueue-to-lease p99 with A's flood queued / without"),
    Target("scale_read_vs_empty", "<=", 1.5, "x", ("scale", "worst_read_vs_empty"),
           "scale: the slowest operator read's p50, full / nearly empty table"),
    Target("scale_read_p50", "<=", 20, "ms", ("scale", "worst_read_p50_ms"),
           "scale: the slowest operator read's p50 on the full table"),
    Target("scale_hot_vs_empty", "<=", 1.2, "x", ("scale", "worst_hot_vs_empty"),
           "scale: enqueue and lease p50, full / nearly empty table (the worse)"),
    *(
        Target(f"soak_{bound.key}", "<=", bound.most, "x",
               ("soak", "summary", bound.key, "late_vs_early"),
               f"soak: {bound.what}, late / early after warm-up")
        for bound in JUDGED
    ),
]  # fmt: skip

_OPS = {">=": operator.ge, "<=": operator.le}


def judge(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with what was measured and whether it passes (None: not measured)."""
    judged = []
    for t in TARGETS:
        measured = t.measured(scenarios)
        judged.append(
            {
                "key": t.key,
                "description": t.description,
                "target": f"{t.op} {t.value:g} {t.unit}",
                "unit": t.unit,
                "measured": measured,
                "pass": None if measured is None else bool(_OPS[t.op](measured, t.value)),
            }
        )
    return judged


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _table(title: str, *columns: str) -> Table:
    """A table whose first column is left-aligned, the figures right-aligned."""
    table = Table(title=title)
    for n, column in enumerate(columns):
        table.add_column(column, justify="left" if n == 0 else "right")
    return table


def render(report: dict[str, Any], console: Console) -> None:
    machine, database, service = report["machine"], report["database"], report["service"]
    console.print(
        f"[bold]jobq benchmark[/] {report['started_at']}  "
        f"{machine['cores']} cores, {machine['memory_gib']} GiB, Python {machine['python']}, "
        f"PostgreSQL {database['version']} ({database['mode']}), "
        f"{service['workers']} service process(es), {report['config']['generators']} "
        f"generator process(es), jobq {machine['jobq_commit']}"
    )
    scenarios = report["scenarios"]
    verdicts = {True: "[green]pass[/]", False: "[red]FAIL[/]", None: "[dim]not run[/]"}
    targets = _table("Targets", "", "measured", "target", "")
    for t in report["targets"]:
        digits = 0 if t["unit"] == "jobs/s" else 2
        measured = "-" if t["measured"] is None else f"{t['measured']:,.{digits}f} {t['unit']}"
        targets.add_row(t["description"], measured, t["target"], verdicts[t["pass"]])
    console.print(targets)
    _render_throughput(scenarios, console)
    if "floor" in scenarios:
        _render_rounds(scenarios["floor"], console)
    _render_latency(scenarios, console)
    _render_cpu(scenarios, console)
    if "prune" in scenarios:
        _render_prune(scenarios["prune"], console)
    if "push" in scenarios:
        _render_push(scenarios["push"], console)
    if "soak" in scenarios:
        _render_soak(scenarios["soak"], console)
    if "scale" in scenarios:
        _render_scale(scenarios["scale"], console)
    for note in report["notes"]:
        console.print(f"[yellow]note:[/] {note}")


def _render_throughput(scenarios: dict[str, Any], console: Console) -> None:
    table = _table("Throughput (jobs/s)", "scenario", "jobs", "seconds", "jobs/s", "notes")

    def row(label: str, s: dict[str, Any], note: str = "") -> None:
        table.add_row(label, _num(s["jobs"]), _num(s["seconds"], 2), _num(s["jobs_per_s"]), note)

    enqueued, drained = scenarios.get("batch_enqueue"), scenarios.get("drain")
    if enqueued and drained:
        row(f"batch enqueue ({enqueued['batch']} per call)", enqueued)
        row("drain (lease 100 + ack)", drained)
        both = {
            "jobs": drained["jobs"],
            "seconds": enqueued["seconds"] + drained["seconds"],
            "jobs_per_s": drained["enqueue_and_drain_jobs_per_s"],
        }
        row("enqueue, then drain", both, "the two phases above, end to end")
    if "single" in scenarios:
        row("single (3 calls a job)", scenarios["single"])
    limited = scenarios.get("limited")
    if limited:
        for name, figures in (("separate calls", limited.get("separate")), ("", limited)):
            if not figures:
                continue
            row(
                f"limited drain (max_running {figures['max_running']}"
                f"{', ' + name if name else ''})",
                figures,
                f"{figures['of_limit_rate']:.0%} of the limit's"
                f" {figures['limit_jobs_per_s']:,.0f} (jobs held {figures['hold_ms']:.0f} ms;"
                f" at most {figures['bound_of_limit_rate']:.0%} with one lease call"
                f" {figures['one_lease_ms']:.2f} ms);"
                f" running {figures['running_mean']} on average, at most"
                f" {figures['running_max']}",
            )
    if table.row_count:
        console.print(table)


def _render_rounds(floor: dict[str, Any], console: Console) -> None:
    """jobq and the floor back to back: each round's figures and ratios, and the medians."""
    for load, title in (
        ("drain", f"Drain back to back ({floor['drain_jobs']:,} jobs a load, "
                  f"{floor['drain_workers']} workers): jobs/s"),
        ("single", f"Single-job path back to back ({floor['single_jobs']:,} jobs a load, "
                   f"{floor['single_concurrency']} loops): jobs/s"),
    ):  # fmt: skip
        table = _table(title, "round", "order", "jobq", "floor", "jobq/floor")
        rounds = [(str(n), r[load]) for n, r in enumerate(floor["rounds"], 1)]
        for label, r in [*rounds, ("median", {**floor["median"][load], "order": []})]:
            table.add_row(
                label, ", ".join(r["order"]), _num(r["jobq"]), _num(r["floor"]),
                _num(r["vs_floor"], 3),
            )  # fmt: skip
        console.print(table)
    waits = _table(
        f"Enqueue-to-lease back to back ({floor['latency_samples']:,} jobs a load): ms",
        "round", "order", "jobq p50", "floor p50", "p50 ratio", "jobq p99", "floor p99",
        "p99 ratio",
    )  # fmt: skip
    for n, r in enumerate(floor["rounds"], 1):
        w = r["wait"]
        waits.add_row(
            str(n), ", ".join(w["order"]),
            _num(w["jobq"]["p50_ms"], 2), _num(w["floor"]["p50_ms"], 2), _num(w["p50_vs_floor"], 3),
            _num(w["jobq"]["p99_ms"], 2), _num(w["floor"]["p99_ms"], 2), _num(w["p99_vs_floor"], 3),
        )  # fmt: skip
    median = floor["median"]["wait"]
    waits.add_row(
        "median", "", "", "", _num(median["p50_vs_floor"], 3), "", "",
        _num(median["p99_vs_floor"], 3),
    )  # fmt: skip
    console.print(waits)


def _render_latency(scenarios: dict[str, Any], console: Console) -> None:
    wait = scenarios.get("enqueue_to_lease")
    if not wait:
        return
    table = _table("Latency (ms)", "what", "count", "p50", "p95", "p99", "mean", "max")
    for label, s in (
        (f"enqueue-to-lease, {wait['waiting_workers']} workers long-polling", wait),
        ("  of which the enqueue call", wait["enqueue_request"]),
    ):
        figures = (s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms"))
        table.add_row(label, _num(s["count"]), *(_num(f, 2) for f in figures))
    console.print(table)


def _render_push(push: dict[str, Any], console: Console) -> None:
    table = _table(
        f"Push: {push['jobs']:,} deliveries a round, concurrency {push['concurrency']}, "
        f"envelopes of {push['envelope_bytes']} bytes",
        "round", "push/s", "floor/s", "push / floor",
    )  # fmt: skip
    rounds = [(str(n), r) for n, r in enumerate(push["rounds"], 1)]
    for label, r in [*rounds, ("median", push["median"])]:
        table.add_row(label, _num(r["push_per_s"]), _num(r["floor_per_s"]), _num(r["vs_floor"], 2))
    console.print(table)
    s = push["latency"]
    table = _table("Push latency (ms)", "what", "count", "p50", "p95", "p99", "max")
    figures = (s[k] for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))
    table.add_row(
        "enqueue to delivery, dispatcher idle", _num(s["count"]), *(_num(f, 2) for f in figures)
    )
    console.print(table)


def _render_cpu(scenarios: dict[str, Any], console: Console) -> None:
    table = _table(
        "CPU per job (µs) and cores busy on average",
        "scenario", "service µs", "postgres µs", "generator µs", "service cores", "pg cores",
        "gen cores", "other cores",
    )  # fmt: skip
    for key, label in (
        ("batch_enqueue", "batch enqueue"),
        ("drain", "drain"),
        ("limited", "limited drain"),
        ("single", "single"),
        ("enqueue_to_lease", "enqueue-to-lease"),
    ):
        if key in scenarios:
            c = scenarios[key]["cpu"]
            per_job = (c[f"{who}_us_per_job"] for who in ("service", "postgres", "generator"))
            cores = (c[f"{who}_cores"] for who in ("service", "postgres", "generator", "other"))
            table.add_row(label, *(_num(f, 1) for f in per_job), *(_num(f, 2) for f in cores))
    if table.row_count:
        console.print(table)


def _render_prune(prune: dict[str, Any], console: Console) -> None:
    """The pruner's pass without and with its rest, and the lease latency beside it."""
    table = _table(
        f"The pruner deleting {prune['rows']:,} finished jobs beside a lease load",
        "rest (s)", "seconds", "rows/s", "WAL MB", "dead tuples", "lease p99 alone",
        "lease p99 pruning", "p99 ratio",
    )  # fmt: skip
    for run in prune["runs"]:
        table.add_row(
            _num(run["pause_seconds"], 2),
            _num(run["seconds"], 1),
            _num(run["rows_per_s"]),
            _num(run["wal_bytes"] / 1e6, 0),
            _num(run["dead_tuples"]),
            _num(run["lease_alone"]["p99_ms"], 2),
            _num(run["lease_pruning"]["p99_ms"], 2),
            _num(run["lease_p99_ratio"], 2),
        )
    console.print(table)


SHOWN_SAMPLES = 20


def _render_soak(soak: dict[str, Any], console: Console) -> None:
    """Samples over time (at most 20, evenly spread) and the early/late comparison."""
    samples = soak["samples"]
    step = max(1, -(-len(samples) // SHOWN_SAMPLES))
    table = Table(
        title=f"Soak: {soak['minutes']:g} min at {soak['rate_per_s']:g} jobs/s, "
        f"retention {soak['retain_seconds']} s ({soak['enqueued']:,} enqueued)"
    )
    reference = bool(soak.get("reference"))
    for column in (
        "t (s)", "table MB", "index MB", "live", "dead", "vacuums",
        "leased", "p50 ms", "p99 ms", *(("floor p50", "floor p99") if reference else ()),
        "RSS MB",
    ):  # fmt: skip
        table.add_column(column, justify="right")
    latencies = ["latency_p50_ms", "latency_p99_ms"]
    if reference:
        latencies += [f"{FLOOR}{key}" for key in latencies]
    for s in samples[::step]:
        table.add_row(
            f"{s['t_s']:.0f}",
            f"{s['table_mb']:.1f}",
            f"{s['index_mb']:.1f}",
            f"{s['live_tuples']:,}",
            f"{s['dead_tuples']:,}",
            f"{s['vacuums']}",
            f"{s.get('leased', 0):,}",
            *("-" if s.get(key) is None else f"{s[key]:.2f}" for key in latencies),
            f"{s['rss_mb']:.0f}",
        )
    console.print(table)
    summary = Table(title="Soak after warm-up: early third against late third")
    for column in ("figure", "early", "late", "late / early", "at most", ""):
        summary.add_column(column, justify="left" if column == "figure" else "right")
    machine = {bound.key for bound in REFERENCE_BOUNDS}
    for key, figure in soak["summary"].items():
        if figure["flat"] is None:
            summary.add_row(figure["what"], "-", "-", "-", "-", "[dim]not measured[/]")
            continue
        if key in machine:  # the machine's drift, the reference for jobq's: not judged
            verdict = "[dim]reference[/]"
        else:
            verdict = "[green]flat[/]" if figure["flat"] else "[red]GROWS[/]"
        unit = f" {figure['unit']}" if figure["unit"] else ""
        summary.add_row(
            figure["what"],
            f"{figure['early']:,.2f}{unit}",
            f"{figure['late']:,.2f}{unit}",
            f"{figure['late_vs_early']:.3f}",
            f"{figure['at_most']:g}",
            verdict,
        )
    console.print(summary)


def _render_scale(scale: dict[str, Any], console: Console) -> None:
    table = _table(
        f"Scale: {scale['rows']:,} rows of history against {scale['empty_rows']:,} "
        f"(p50 / p95 ms of {scale['calls']} calls; fill {scale['fill_seconds']} s)",
        "call", "nearly empty", f"{scale['rows']:,} rows", "p50 ratio",
    )  # fmt: skip
    for name, call in scale["calls_by_name"].items():
        e, f = call["empty"], call["full"]
        table.add_row(
            name,
            f"{e['p50_ms']:.2f} / {e['p95_ms']:.2f}",
            f"{f['p50_ms']:.2f} / {f['p95_ms']:.2f}",
            f"{call['p50_vs_empty']:.2f}x",
        )
    console.print(table)
