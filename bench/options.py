"""The benchmark's options: the configuration of a run, and the command line that sets it."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench import database

SCENARIOS = (
    "bare", "drain", "limited", "single", "latency", "lease-levels", "dashboard", "floor",
    "paired", "soak",
)  # fmt: skip
DEFAULT_SCENARIOS = SCENARIOS[:-1]  # the soak runs when --soak gives it minutes
PROFILED_SCENARIOS = ("drain", "single", "latency")
LEASE_BATCH = 100
RUN_TIMEOUT_SECONDS = 3600.0
OUTAGE_RETRIES = 2
OUTAGE_WAIT_SECONDS = 120.0
_OUTAGE_SIGNS = re.compile(
    r"database_unavailable|ConnectionDoesNotExist|AdminShutdown|CannotConnectNow|"
    r"ConnectionRefused|Connection refused|connection was closed|the database system is"
)
REPORT_WIDTH = 150
BUSY_BEFORE_WARNING_CORES = 0.25
T = TypeVar("T")


@dataclass
class Config:
    """Every knob of a run; recorded in the JSON."""

    quick: bool = False
    workers: int = 2
    generators: int = 1
    jobs: int = 200_000
    enqueue_batch: int = 1000
    enqueue_concurrency: int = 4
    drain_workers: int = 8
    single_jobs: int = 10_000
    single_concurrency: int = 8
    paired_rounds: int = 3  # jobq's and the floors' loads, back to back
    paired_jobs: int = 5_000  # ... their single-job path
    paired_drain_jobs: int = 100_000  # ... their drain
    latency_samples: int = 1000
    latency_workers: int = 4
    latency_interval_ms: float = 10.0
    finished_rows: list[int] = field(default_factory=lambda: [0, 1_000_000, 5_000_000])
    lease_calls: int = 500
    lease_warmup: int = 50
    dashboard_rows: int = 1_000_000
    limited_hold_ms: float = 20.0  # the limited drain: each leased batch held this long
    bare_jobs: int = 500_000
    bare_single_jobs: int = 20_000
    bare_connections: int = 4
    warmup: bool = True
    soak_minutes: float = 0.0
    soak_rate: float = 200.0
    soak_workers: int = 4
    soak_fail_every: int = 20
    soak_reference_rate: float = 50.0
    scenarios: list[str] = field(default_factory=lambda: list(DEFAULT_SCENARIOS))
    database_name: str = database.DEFAULT_DATABASE
    service_env: dict[str, str] = field(default_factory=dict)


QUICK = {
    "workers": 1,
    "jobs": 2000,
    "drain_workers": 4,
    "single_jobs": 200,
    "single_concurrency": 4,
    "paired_rounds": 1,
    "paired_jobs": 100,
    "paired_drain_jobs": 2000,
    "latency_samples": 30,
    "latency_workers": 2,
    "finished_rows": [0, 20_000],
    "dashboard_rows": 20_000,
    "lease_calls": 50,
    "lease_warmup": 10,
    "bare_jobs": 20_000,
    "bare_single_jobs": 1000,
    "warmup": False,
}


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(v.replace("_", "")) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not levels or levels[0] < 0:
        raise argparse.ArgumentTypeError("give one or more counts >= 0, e.g. 0,1000000,5000000")
    return levels


def _scenarios(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(SCENARIOS)}")
    return [s for s in SCENARIOS if s in chosen]


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME=VALUE")
    return name, value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    defaults = Config()
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "jobq's benchmark. Starts its own `jobq serve` on a dedicated database "
            f"({defaults.database_name}, dropped and recreated first) on the configured "
            "PostgreSQL (--database-url, else JOBQ_DATABASE_URL, else the embedded server), "
            "drives it over HTTP from separate load-generator processes, runs the bare "
            "SKIP LOCKED claim loop on asyncpg as the reference, and reports throughput, "
            "latency and CPU per job (service, PostgreSQL, generators) against the targets."
        ),
        epilog="Full size takes a few minutes (most of it filling 5M finished rows).",
    )
    a = p.add_argument
    a(
        "--quick",
        action="store_true",
        help="a tiny, fast configuration: a smoke test, not a measurement (explicit options apply)",
    )
    a(
        "--json",
        metavar="PATH",
        help="write the JSON report here ('-': stdout, the table then goes to stderr)",
    )
    a("--check", action="store_true", help="exit 1 when a target is missed")
    a("--database-url", help="PostgreSQL server to use [default: JOBQ_DATABASE_URL, else embedded]")
    a(
        "--database-name",
        default=defaults.database_name,
        help="the benchmark's database, DROPPED and recreated [default: %(default)s]",
    )
    a(
        "--only",
        type=_scenarios,
        dest="scenarios",
        metavar="LIST",
        help=f"comma-separated subset of: {','.join(SCENARIOS)} [default: all but soak]",
    )
    a(
        "--workers",
        type=_positive,
        help=f"jobq serve processes [default: {defaults.workers}; quick: {QUICK['workers']}]",
    )
    a(
        "--generators",
        type=_positive,
        help=f"load-generator processes (enqueue, drain, single) [default: {defaults.generators}]",
    )
    a(
        "--jobs",
        type=_positive,
        help=f"jobs to batch-enqueue and drain [default: {defaults.jobs:,}]",
    )
    a(
        "--enqueue-batch",
        type=_positive,
        help=f"jobs per batch enqueue call (max 1000) [default: {defaults.enqueue_batch}]",
    )
    a(
        "--enqueue-concurrency",
        type=_positive,
        help=f"concurrent batch enqueue calls [default: {defaults.enqueue_concurrency}]",
    )
    a(
        "--drain-workers",
        type=_positive,
        help=f"drain workers, leasing {LEASE_BATCH} each [default: {defaults.drain_workers}]",
    )
    a(
        "--single-jobs",
        type=_positive,
        help=f"jobs through the single-job path [default: {defaults.single_jobs:,}]",
    )
    a(
        "--single-concurrency",
        type=_positive,
        help=f"concurrent single-job loops [default: {defaults.single_concurrency}]",
    )
    a(
        "--paired-rounds",
        type=_positive,
        help="rounds of jobq's and both floors' loads back to back "
        f"[default: {defaults.paired_rounds}; quick: 1]",
    )
    a(
        "--paired-jobs",
        type=_positive,
        help=f"jobs per single-job load of those rounds [default: {defaults.paired_jobs:,}]",
    )
    a(
        "--paired-drain-jobs",
        type=_positive,
        help=f"jobs per drain of those rounds [default: {defaults.paired_drain_jobs:,}]",
    )
    a(
        "--latency-samples",
        type=_positive,
        help=f"jobs timed from enqueue to lease [default: {defaults.latency_samples}]",
    )
    a(
        "--latency-workers",
        type=_positive,
        help=f"workers long-polling for them [default: {defaults.latency_workers}]",
    )
    a(
        "--latency-interval-ms",
        type=float,
        help=f"mean gap between enqueues, ±50%% [default: {defaults.latency_interval_ms:g}]",
    )
    a(
        "--finished-rows",
        type=_levels,
        metavar="N,N,...",
        help="finished-row levels for lease latency [default: 0,1000000,5000000; quick: 0,20000]",
    )
    a(
        "--limited-hold-ms",
        type=float,
        help=f"the limited drain's work per batch [default: {defaults.limited_hold_ms:g}]",
    )
    a(
        "--dashboard-rows",
        type=_positive,
        help=f"finished rows under the dashboard's calls [default: {defaults.dashboard_rows:,}]",
    )
    a(
        "--lease-calls",
        type=_positive,
        help=f"timed lease calls per level [default: {defaults.lease_calls}]",
    )
    a(
        "--bare-jobs",
        type=_positive,
        help=f"jobs for the bare loop, {LEASE_BATCH} at a time [default: {defaults.bare_jobs:,}]",
    )
    a(
        "--bare-single-jobs",
        type=_positive,
        help=f"jobs for the bare loop one at a time [default: {defaults.bare_single_jobs:,}]",
    )
    a(
        "--bare-connections",
        type=_positive,
        help=f"asyncpg connections of the bare loop [default: {defaults.bare_connections}]",
    )
    a(
        "--soak",
        type=float,
        metavar="MINUTES",
        dest="soak_minutes",
        help="run the soak for MINUTES (alone, unless --only names more): a steady load "
        "with retention on, sampling sizes, dead tuples, latency and memory",
    )
    a("--soak-rate", type=float, help="the soak's enqueues per second [default: 200]")
    a("--soak-workers", type=_positive, help="the soak's long-polling workers [default: 4]")
    a(
        "--soak-fail-every",
        type=_positive,
        help="1 in N of the soak's jobs fails once, then succeeds [default: 20]",
    )
    a(
        "--soak-reference-rate",
        type=float,
        help="enqueues per second of the framework floor's soak load, run beside jobq's "
        "as the machine's reference; 0: none [default: 50]",
    )
    a("--no-warmup", action="store_true", help="skip the untimed warm-up round")
    a(
        "--service-env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for jobq serve (e.g. JOBQ_DB_POOL_SIZE=20); repeatable",
    )
    a(
        "--profile",
        type=Path,
        metavar="DIR",
        help=f"record py-spy profiles of the service during {', '.join(PROFILED_SCENARIOS)} "
        "into DIR (this slows the service: such a run is not a measurement)",
    )
    return p


_OPTIONS = (
    "workers",
    "generators",
    "jobs",
    "enqueue_batch",
    "enqueue_concurrency",
    "drain_workers",
    "single_jobs",
    "single_concurrency",
    "paired_rounds",
    "paired_jobs",
    "paired_drain_jobs",
    "latency_samples",
    "latency_workers",
    "latency_interval_ms",
    "finished_rows",
    "dashboard_rows",
    "limited_hold_ms",
    "lease_calls",
    "bare_jobs",
    "bare_single_jobs",
    "bare_connections",
    "scenarios",
    "database_name",
    "soak_minutes",
    "soak_rate",
    "soak_workers",
    "soak_fail_every",
    "soak_reference_rate",
)


def config_from(args: argparse.Namespace) -> Config:
    config = Config(**(QUICK if args.quick else {}))  # type: ignore[arg-type]
    config.quick = args.quick
    for name in _OPTIONS:
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    if args.no_warmup:
        config.warmup = False
    config.enqueue_batch = min(config.enqueue_batch, 1000)
    config.service_env = dict(args.service_env)
    if config.soak_minutes:
        if args.scenarios is None:
            config.scenarios = ["soak"]
        elif "soak" not in config.scenarios:
            config.scenarios.append("soak")
    elif "soak" in config.scenarios:
        raise SystemExit("the soak needs its length: --soak MINUTES")
    return config


# ---- the run -------------------------------------------------------------------------
