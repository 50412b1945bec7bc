"""The benchmark's options: the configuration of a run, and the command line that sets it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields

from app.core.config import DEFAULT_PUSH_CONCURRENCY
from bench import database

SCENARIOS = (
    "drain", "limited", "single", "latency", "floor", "fair", "prune", "push", "soak", "scale",
)  # fmt: skip
# the soak runs when --soak gives it minutes, the scale scenario when --scale gives rows;
# the fair queues', the pruner's and the push scenarios when named
DEFAULT_SCENARIOS = SCENARIOS[:-5]
# The service under test keeps its finished jobs: the prune scenario's pruner is measured.
KEEP_FINISHED = {"JOBQ_RETAIN_SUCCEEDED_SECONDS": "0", "JOBQ_RETAIN_FAILED_SECONDS": "0"}
# The push scenario's replica delivers; the main service, which cannot reach its
# endpoint (loopback), must not.
NOT_DELIVERING = {"JOBQ_PUSH_CONCURRENCY": "0"}
LEASE_BATCH = 100
RUN_TIMEOUT_SECONDS = 3600.0
REPORT_WIDTH = 150


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
    latency_samples: int = 1000
    latency_workers: int = 4
    latency_interval_ms: float = 10.0
    limited_hold_ms: float = 20.0  # the limited drain: each leased batch held this long
    prune_rows: int = 2_000_000  # the prune scenario: finished jobs to delete
    floor_rounds: int = 3  # jobq's and the floor's loads back to back
    floor_drain_jobs: int = 100_000  # ... their drain
    floor_single_jobs: int = 5_000  # ... their single-job path
    fair_flood_jobs: int = 200_000  # tenant A's jobs queued ahead of tenants B to K
    fair_steady_seconds: float = 10.0  # how long B to K enqueue meanwhile
    warmup: bool = True
    soak_minutes: float = 0.0
    soak_rate: float = 200.0
    soak_workers: int = 4
    soak_fail_every: int = 20
    soak_reference_rate: float = 50.0
    scale_rows: int = 0  # rows of history the scale scenario fills (bench.history)
    push_jobs: int = 20_000  # the push scenario: deliveries per round
    push_concurrency: int = DEFAULT_PUSH_CONCURRENCY  # ... in flight, dispatcher and floor
    push_rounds: int = 3  # ... rounds of the dispatcher and the floor back to back
    push_latency_samples: int = 200  # ... jobs timed from enqueue to delivery
    push_latency_interval_ms: float = 20.0  # ... mean gap between two of them, ±50%
    scenarios: list[str] = field(default_factory=lambda: list(DEFAULT_SCENARIOS))
    database_name: str = database.DEFAULT_DATABASE
    service_env: dict[str, str] = field(default_factory=dict)


QUICK = {
    "workers": 1,
    "jobs": 2000,
    "drain_workers": 4,
    "single_jobs": 200,
    "single_concurrency": 4,
    "latency_samples": 30,
    "latency_workers": 2,
    "floor_rounds": 1,
    "floor_drain_jobs": 2000,
    "floor_single_jobs": 100,
    "fair_flood_jobs": 2000,
    "fair_steady_seconds": 2.0,
    "prune_rows": 20_000,
    "push_jobs": 1000,
    "push_rounds": 1,
    "push_latency_samples": 20,
    "warmup": False,
}


def _scenarios(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    if not chosen or set(chosen) - set(SCENARIOS):
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
    d = Config()
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "jobq's benchmark. Starts its own `jobq serve` on a dedicated database "
            f"({d.database_name}, dropped and recreated first) on --database-url, else "
            "JOBQ_DATABASE_URL, else the embedded server; drives it over HTTP from separate "
            "load-generator processes; runs the framework floor (FastAPI and one bare "
            "statement per call) back to back with it; reports throughput, latency and "
            "CPU per job against the targets."
        ),
        epilog="Full size takes a few minutes; --quick, seconds.",
    )
    a = p.add_argument
    a("--quick", action="store_true", help="a tiny configuration: a smoke test, not a measurement")
    a("--json", metavar="PATH", help="also write the report as JSON ('-': stdout)")
    a("--check", action="store_true", help="exit 1 when a target is missed")
    a(
        "--database-url",
        metavar="URL",
        help="PostgreSQL server [default: JOBQ_DATABASE_URL, else embedded]",
    )
    a(
        "--database-name",
        metavar="NAME",
        help=f"the database, DROPPED and recreated [{d.database_name}]",
    )
    a(
        "--only",
        type=_scenarios,
        dest="scenarios",
        metavar="LIST",
        help=f"comma-separated subset of: {','.join(SCENARIOS)} [all but soak]",
    )
    a(
        "--soak",
        type=float,
        metavar="MINUTES",
        dest="soak_minutes",
        help="run the soak for MINUTES (alone, unless --only names more)",
    )
    a(
        "--scale",
        type=_positive,
        metavar="ROWS",
        dest="scale_rows",
        help="time operator reads and hot calls on ROWS rows of history (alone, unless "
        "--only names more)",
    )
    for flag, kind, text in (
        ("--workers", _positive, "jobq serve processes"),
        ("--generators", _positive, "load-generator processes"),
        ("--jobs", _positive, "jobs to batch-enqueue and drain"),
        ("--enqueue-batch", _positive, "jobs per enqueue call (at most 1000)"),
        ("--enqueue-concurrency", _positive, "concurrent enqueue calls"),
        ("--drain-workers", _positive, f"drain workers, each leasing {LEASE_BATCH}"),
        ("--single-jobs", _positive, "jobs through the single-job path"),
        ("--single-concurrency", _positive, "concurrent single-job loops"),
        ("--latency-samples", _positive, "jobs timed from enqueue to lease"),
        ("--latency-workers", _positive, "workers long-polling for them"),
        ("--latency-interval-ms", float, "mean gap between two of them, ±50%"),
        ("--limited-hold-ms", float, "the limited drain's work per leased batch"),
        ("--prune-rows", _positive, "finished jobs the prune scenario deletes"),
        ("--floor-rounds", _positive, "rounds of jobq and the floor back to back"),
        ("--floor-drain-jobs", _positive, "jobs per drain of a round"),
        ("--floor-single-jobs", _positive, "jobs per single-job load of a round"),
        ("--push-jobs", _positive, "deliveries per push round"),
        ("--push-concurrency", _positive, "deliveries in flight, dispatcher and floor"),
        ("--push-rounds", _positive, "rounds of push and its floor back to back"),
        ("--push-latency-samples", _positive, "jobs timed from enqueue to delivery"),
        ("--push-latency-interval-ms", float, "mean gap between two of them, ±50%"),
        ("--soak-rate", float, "the soak's enqueues per second"),
        ("--soak-workers", _positive, "the soak's long-polling workers"),
        ("--soak-fail-every", _positive, "1 in N of the soak's jobs fails once"),
        ("--soak-reference-rate", float, "the floor's soak load beside jobq's; 0: none"),
    ):
        default = getattr(d, flag[2:].replace("-", "_"))
        shown = f"{default:,}" if isinstance(default, int) else f"{default:g}"
        a(flag, type=kind, metavar="N", help=f"{text} [{shown}]".replace("%", "%%"))
    a("--no-warmup", dest="warmup", action="store_false", default=None, help="skip the warm-up")
    a(
        "--service-env",
        type=_env_pair,
        action="append",
        metavar="NAME=VALUE",
        help="extra environment for jobq serve, e.g. JOBQ_DB_POOL_SIZE=20; repeatable",
    )
    return p


def config_from(args: argparse.Namespace) -> Config:
    """The defaults (or --quick's), overridden by every option given."""
    config = Config(**QUICK if args.quick else {})  # type: ignore[arg-type]
    config.quick = args.quick
    for option in fields(Config):
        value = getattr(args, option.name, None)
        if value is not None and option.name != "quick":
            setattr(config, option.name, value)
    config.service_env = dict(args.service_env or [])
    if "prune" in config.scenarios:
        config.service_env = {**KEEP_FINISHED, **config.service_env}
    if "push" in config.scenarios:
        config.service_env = {**NOT_DELIVERING, **config.service_env}
    config.enqueue_batch = min(config.enqueue_batch, 1000)
    if config.soak_minutes:
        if args.scenarios is None:
            config.scenarios = ["soak"]
        elif "soak" not in config.scenarios:
            config.scenarios.append("soak")
    elif "soak" in config.scenarios:
        raise SystemExit("the soak needs its length: --soak MINUTES")
    if config.scale_rows:
        if args.scenarios is None and not config.soak_minutes:
            config.scenarios = ["scale"]
        elif "scale" not in config.scenarios:
            config.scenarios.append("scale")
    elif "scale" in config.scenarios:
        raise SystemExit("the scale scenario needs its size: --scale ROWS")
    return config
