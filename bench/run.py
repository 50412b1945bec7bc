"""`python -m bench`: jobq's benchmark, end to end, in one command.

1. A dedicated database (`jobq_bench`; `--database-name`) on the configured server
   (`--database-url`, else `JOBQ_DATABASE_URL`, else the embedded server) is dropped,
   created and migrated: runs are comparable and no user data is touched.
2. `jobq serve --workers N` starts as a subprocess on it, and is always stopped with
   SIGTERM at the end.
3. Scenarios, each from an emptied jobs table, load coming from separate generator
   processes (`bench.load`), CPU of the service, PostgreSQL and the generators measured
   over each loaded window (`bench.cpu`):
   - bare: the SKIP LOCKED claim loop straight on asyncpg on a minimal table, no HTTP:
     what the database allows (claim only: the reference; also with a finishing
     statement, with an insert, and jobq's own LEASE + FINISH statements);
   - drain: batch-enqueue N jobs (timed: batch enqueue), then W workers lease 100 at a
     time and ack each batch with one `/v1/acks` call (timed: drain);
   - single: enqueue, lease and complete one job per call;
   - latency: enqueue-to-lease latency with workers already long-polling;
   - lease-levels: single lease calls with 0 / 1M / 5M finished rows in the table;
   - floor: the drain and single-job loads, unchanged, against `bench.floor` (FastAPI
     and one bare statement per call, served like jobq): what the HTTP stack allows.
4. A table on stdout, JSON with `--json PATH` (`-` for stdout, the table then goes to
   stderr); `--check` makes a missed target exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import asyncpg
import httpx
import psutil
from rich.console import Console

from app.db.url import redacted
from bench import database, report
from bench.cpu import Meters, TreeMeter, cpu_report
from bench.load import GeneratorRun, run_generators, split
from bench.profile import Profiler, summarize
from bench.service import REPO, Service
from bench.stats import latency_summary, ratio

SCENARIOS = ("bare", "drain", "single", "latency", "lease-levels", "floor")
PROFILED_SCENARIOS = ("drain", "single")
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
    latency_samples: int = 1000
    latency_workers: int = 4
    latency_interval_ms: float = 10.0
    finished_rows: list[int] = field(default_factory=lambda: [0, 1_000_000, 5_000_000])
    lease_calls: int = 500
    lease_warmup: int = 50
    bare_jobs: int = 500_000
    bare_single_jobs: int = 20_000
    bare_connections: int = 4
    warmup: bool = True
    scenarios: list[str] = field(default_factory=lambda: list(SCENARIOS))
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
    "finished_rows": [0, 20_000],
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
        help=f"comma-separated subset of: {','.join(SCENARIOS)} [default: all]",
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
    "latency_samples",
    "latency_workers",
    "latency_interval_ms",
    "finished_rows",
    "lease_calls",
    "bare_jobs",
    "bare_single_jobs",
    "bare_connections",
    "scenarios",
    "database_name",
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
    return config


# ---- the run -------------------------------------------------------------------------


class Bench:
    """One run: the database, the service, the meters, the scenarios' results."""

    def __init__(
        self,
        config: Config,
        console: Console,
        *,
        database_url: str | None = None,
        profile_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.database_url = database_url
        self.console = console
        self.profile_dir = profile_dir
        self.url = ""
        self.service: Service | None = None
        self.meters: Meters | None = None
        self.scenarios: dict[str, Any] = {}
        self.profiles: dict[str, Any] = {}
        self.notes: list[str] = []
        self.spread: list[int] = []  # client connections per service process, last load
        self.postmaster: int | None = None
        self.log_dir: Path | None = None  # the run's temporary folder, for service logs

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")

    @staticmethod
    def db(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    @property
    def base_url(self) -> str:
        assert self.service is not None
        return self.service.url

    def generate(self, kind: str, params: list[dict[str, Any]]) -> GeneratorRun:
        assert self.meters is not None and self.service is not None
        service = self.service

        def spread() -> None:
            self.spread = service.connections_per_process()

        self.spread = []
        return run_generators(
            kind, params, self.meters, timeout=RUN_TIMEOUT_SECONDS, on_ready=spread
        )

    @contextmanager
    def profiled(self, name: str) -> Iterator[None]:
        if self.profile_dir is None or name not in PROFILED_SCENARIOS or self.service is None:
            yield
            return
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        output = self.profile_dir / f"{name}.txt"
        with Profiler(self.service.pid, output):
            yield
        if output.exists():
            self.profiles[name] = {"file": str(output), **summarize(output)}
        else:
            self.notes.append(
                f"py-spy wrote no profile for {name}: see {output.with_suffix('.log')}"
            )

    def cpu(self, run: GeneratorRun, jobs: int) -> dict[str, Any]:
        result = cpu_report(
            run.before, run.after, jobs=jobs, generator_seconds=run.generator_cpu_seconds
        )
        busiest = max(float(r["cpu_s"]) for r in run.results) / float(result["window_s"])
        result["generator_busiest_process_cores"] = round(busiest, 3)
        result["service_connections_per_process"] = self.spread
        if busiest > 0.9:
            self.notes.append(
                "a load generator process was busy >90% of a core: the generator may be the "
                "bottleneck (try --generators 2)"
            )
        return result

    # ---- scenarios -------------------------------------------------------------------

    def bare(self) -> None:
        c = self.config
        results: dict[str, Any] = {}
        batch, single = c.bare_jobs, c.bare_single_jobs
        for key, mode, rows, size, label in (
            ("batch", "claim", batch, LEASE_BATCH, f"claim {LEASE_BATCH}"),
            ("batch_with_finish", "claim_finish", batch, LEASE_BATCH, "claim 100 + finish"),
            ("single", "claim", single, 1, "claim 1"),
            ("single_with_finish", "claim_finish", single, 1, "claim 1 + finish"),
            ("single_with_insert", "insert", single, 1, "insert + claim 1 + finish"),
            ("jobq_sql_batch", "jobq_sql", batch, LEASE_BATCH, "jobq's LEASE 100 + FINISH"),
        ):
            if mode == "jobq_sql":
                self.db(database.queue_jobs(self.url, "bench-sql", rows))
            else:
                self.db(database.prepare_bare(self.url, 0 if mode == "insert" else rows))
            self.say(f"bare SKIP LOCKED loop: {label}, {c.bare_connections} connections")
            run = self.generate(
                "bare",
                [
                    {
                        "dsn": database.dsn(self.url),
                        "mode": mode,
                        "batch": size,
                        "connections": c.bare_connections,
                        "jobs": rows,
                        "queue": "bench-sql",
                    }
                ],
            )
            jobs = run.total("jobs")
            if mode == "jobq_sql":
                done = self.db(database.job_states(self.url)).get("succeeded", 0)
            else:
                states = self.db(database.bare_states(self.url))
                done = states.get(1 if mode == "claim" else 2, 0)
            if jobs != rows or done != rows:
                raise RuntimeError(f"bare {key}: {jobs} claimed, {done} done, {rows} expected")
            seconds = max(r["last_done"] for r in run.results) - run.started
            results[key] = {
                "what": label,
                "batch": batch,
                "connections": c.bare_connections,
                "jobs": jobs,
                "statements": run.total("statements"),
                "seconds": round(seconds, 3),
                "jobs_per_s": round(jobs / seconds, 1),
                "cpu": self.cpu(run, jobs),
            }
            self.say(f"  {results[key]['jobs_per_s']:,.0f} jobs/s")
        self.scenarios["bare"] = results

    def drain(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        queue = "bench-drain"
        batches = [
            (first, min(c.enqueue_batch, c.jobs - first))
            for first in range(0, c.jobs, c.enqueue_batch)
        ]
        generators = min(c.generators, c.enqueue_concurrency, len(batches))
        self.say(
            f"batch enqueue: {c.jobs:,} jobs, {c.enqueue_batch} per call, "
            f"{c.enqueue_concurrency} concurrent"
        )
        with self.profiled("enqueue"):
            run = self.generate(
                "enqueue",
                [
                    {
                        "base_url": self.base_url,
                        "queue": queue,
                        "batches": batches[g::generators],
                        "concurrency": share,
                    }
                    for g, share in enumerate(split(c.enqueue_concurrency, generators))
                ],
            )
        states = self.db(database.job_states(self.url))
        if states != {"queued": c.jobs}:
            raise RuntimeError(f"batch enqueue: expected {c.jobs} queued jobs, found {states}")
        seconds = max(r["t1"] for r in run.results) - run.started
        self.scenarios["batch_enqueue"] = {
            "jobs": c.jobs,
            "batch": c.enqueue_batch,
            "concurrency": c.enqueue_concurrency,
            "requests": run.total("requests"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(c.jobs / seconds, 1),
            "request_latency": latency_summary(run.merged("request_ms")),
            "cpu": self.cpu(run, c.jobs),
        }
        self.say(f"  {self.scenarios['batch_enqueue']['jobs_per_s']:,.0f} jobs/s")

        self.db(database.vacuum_analyze(self.url))
        self.say(f"drain: {c.drain_workers} workers, lease {LEASE_BATCH} + one /v1/acks call")
        with self.profiled("drain"):
            run = self.run_drain(queue)
        states = self.db(database.job_states(self.url))
        if run.total("jobs") != c.jobs or states != {"succeeded": c.jobs}:
            raise RuntimeError(f"drain: acked {run.total('jobs')} of {c.jobs}; table: {states}")
        seconds = max(r["last_done"] for r in run.results) - run.started
        self.scenarios["drain"] = {
            "jobs": c.jobs,
            "workers": c.drain_workers,
            "lease_batch": LEASE_BATCH,
            "lease_calls": run.total("lease_calls"),
            "ack_calls": run.total("ack_calls"),
            "calls": run.total("lease_calls") + run.total("ack_calls"),
            "empty_leases": run.total("empty_leases"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(c.jobs / seconds, 1),
            "cpu": self.cpu(run, c.jobs),
        }
        total = self.scenarios["batch_enqueue"]["seconds"] + seconds
        self.scenarios["drain"]["enqueue_and_drain_jobs_per_s"] = round(c.jobs / total, 1)
        self.say(f"  {self.scenarios['drain']['jobs_per_s']:,.0f} jobs/s")

    def run_drain(self, queue: str) -> GeneratorRun:
        """The drain load: workers lease 100 and ack each batch, until `queue` is empty."""
        c = self.config
        generators = min(c.generators, c.drain_workers)
        return self.generate(
            "drain",
            [
                {"base_url": self.base_url, "queue": queue, "workers": share,
                 "max_jobs": LEASE_BATCH}
                for share in split(c.drain_workers, generators)
            ],
        )  # fmt: skip

    def run_single(self, queue: str) -> GeneratorRun:
        """The single-job load: loops of enqueue one, lease one, complete it."""
        c = self.config
        generators = min(c.generators, c.single_concurrency)
        return self.generate(
            "single",
            [
                {"base_url": self.base_url, "queue": queue, "jobs": jobs, "concurrency": share}
                for jobs, share in zip(
                    split(c.single_jobs, generators),
                    split(c.single_concurrency, generators),
                    strict=True,
                )
            ],
        )

    def single(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        self.say(
            f"single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} concurrent loops"
        )
        with self.profiled("single"):
            run = self.run_single("bench-single")
        states = self.db(database.job_states(self.url))
        if run.total("jobs") != c.single_jobs or states != {"succeeded": c.single_jobs}:
            raise RuntimeError(f"single: {run.total('jobs')} of {c.single_jobs}; table: {states}")
        seconds = max(r["t1"] for r in run.results) - run.started
        calls = run.total("calls") + c.single_jobs  # + the enqueues
        self.scenarios["single"] = {
            "jobs": c.single_jobs,
            "concurrency": c.single_concurrency,
            "calls": calls,
            "empty_leases": run.total("empty_leases"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(c.single_jobs / seconds, 1),
            "cpu": self.cpu(run, c.single_jobs),
        }
        self.say(f"  {self.scenarios['single']['jobs_per_s']:,.0f} jobs/s")

    def latency(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        self.say(
            f"enqueue-to-lease latency: {c.latency_workers} workers waiting (wait_seconds 20), "
            f"{c.latency_samples} jobs one at a time every ~{c.latency_interval_ms:g} ms"
        )
        run = self.generate(
            "wait_latency",
            [
                {
                    "base_url": self.base_url,
                    "queue": "bench-wait",
                    "workers": c.latency_workers,
                    "samples": c.latency_samples,
                    "interval_s": c.latency_interval_ms / 1000,
                    "settle_s": 1.0,
                }
            ],
        )
        latencies = run.merged("latency_ms")
        if len(latencies) != c.latency_samples:
            raise RuntimeError(f"latency: {len(latencies)} of {c.latency_samples} jobs arrived")
        self.scenarios["enqueue_to_lease"] = {
            "waiting_workers": c.latency_workers,
            "interval_ms": c.latency_interval_ms,
            **latency_summary(latencies),
            "enqueue_request": latency_summary(run.merged("enqueue_ms")),
            "cpu": self.cpu(run, len(latencies)),
        }
        s = self.scenarios["enqueue_to_lease"]
        self.say(f"  p50 {s['p50_ms']:.2f} ms, p95 {s['p95_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms")

    def _fill_progress(self, base: int) -> Callable[[int], None]:
        return lambda n: self.say(f"  {base + n:,} finished rows")

    def lease_levels(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        queue = "bench-lease"
        levels: list[dict[str, Any]] = []
        filled = 0
        for level in c.finished_rows:
            self.db(database.delete_unfinished(self.url))
            if level > filled:
                self.say(f"filling {level - filled:,} finished rows (to {level:,})")
                started = time.monotonic()
                self.db(
                    database.fill_finished(
                        self.url,
                        queue,
                        level - filled,
                        self._fill_progress(filled),
                    )
                )
                filled = level
                self.say(f"  filled in {time.monotonic() - started:.0f} s; VACUUM ANALYZE")
            self.db(database.vacuum_analyze(self.url))
            states = self.db(database.job_states(self.url))
            self.say(
                f"lease latency at {level:,} finished rows: {c.lease_calls} single lease calls"
            )
            run = self.generate(
                "lease_latency",
                [
                    {
                        "base_url": self.base_url,
                        "queue": queue,
                        "calls": c.lease_calls,
                        "warmup": c.lease_warmup,
                    }
                ],
            )
            summary = latency_summary(run.merged("latency_ms"))
            levels.append(
                {
                    "finished_rows": level,
                    "rows_in_table": sum(states.values()),
                    **summary,
                    "cpu": self.cpu(run, c.lease_calls),
                }
            )
            self.say(f"  p50 {summary['p50_ms']:.2f} ms, p95 {summary['p95_ms']:.2f} ms")
        first, last = levels[0], levels[-1]
        self.scenarios["lease_latency"] = {
            "calls_per_level": c.lease_calls,
            "levels": levels,
            "ratio_p50": ratio(last["p50_ms"], first["p50_ms"]),
            "ratio_p95": ratio(last["p95_ms"], first["p95_ms"]),
            "ratio_of": f"{last['finished_rows']:,} / {first['finished_rows']:,} finished rows",
        }

    @contextmanager
    def serving(self, service: Service) -> Iterator[None]:
        """Point the generators and the service meter at `service` for a while."""
        saved = self.service, self.meters
        self.service = service
        self.meters = Meters(
            TreeMeter(service.pid), TreeMeter(self.postmaster) if self.postmaster else None
        )
        try:
            yield
        finally:
            self.service, self.meters = saved

    def floor(self) -> None:
        """The drain and single-job loads against `bench.floor`: what the stack allows."""
        c = self.config
        assert self.log_dir is not None
        floor = Service(
            self.url, workers=c.workers, log_path=self.log_dir / "floor.log", app="floor"
        )
        self.say(f"framework floor: FastAPI + one bare statement per call, --workers {c.workers}")
        results: dict[str, Any] = {}
        with floor, self.serving(floor):
            self.db(database.prepare_bare(self.url, c.jobs))
            self.say(f"  drain: {c.jobs:,} jobs, {c.drain_workers} workers, lease {LEASE_BATCH}")
            run = self.run_drain("bench-floor")
            self._check_bare("floor drain", run.total("jobs"), c.jobs)
            seconds = max(r["last_done"] for r in run.results) - run.started
            results["drain"] = {
                "jobs": c.jobs,
                "workers": c.drain_workers,
                "seconds": round(seconds, 3),
                "jobs_per_s": round(c.jobs / seconds, 1),
                "cpu": self.cpu(run, c.jobs),
            }
            self.say(f"    {results['drain']['jobs_per_s']:,.0f} jobs/s")
            self.db(database.prepare_bare(self.url, 0))
            self.say(f"  single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} loops")
            run = self.run_single("bench-floor")
            self._check_bare("floor single", run.total("jobs"), c.single_jobs)
            seconds = max(r["t1"] for r in run.results) - run.started
            results["single"] = {
                "jobs": c.single_jobs,
                "concurrency": c.single_concurrency,
                "seconds": round(seconds, 3),
                "jobs_per_s": round(c.single_jobs / seconds, 1),
                "cpu": self.cpu(run, c.single_jobs),
            }
            self.say(f"    {results['single']['jobs_per_s']:,.0f} jobs/s")
        self.scenarios["floor"] = results

    def _check_bare(self, what: str, acked: int, expected: int) -> None:
        done = self.db(database.bare_states(self.url)).get(2, 0)
        if acked != expected or done != expected:
            raise RuntimeError(f"{what}: {acked} acked, {done} done, {expected} expected")

    def attempt(self, name: str, scenario: Callable[[], None]) -> None:
        """Run a scenario; after a database outage (a restart), wait and run it again."""
        for attempt in range(1 + OUTAGE_RETRIES):
            try:
                scenario()
                if self.postmaster and not self.postgres_unchanged():
                    raise DatabaseRestarted("PostgreSQL restarted during the scenario")
                return
            except Exception as exc:
                if attempt == OUTAGE_RETRIES or not _outage(exc):
                    raise
                self.say(
                    f"[yellow]{name}: the database went away ({_first_line(exc)}); retrying[/]"
                )
                self.notes.append(f"{name} was run again after a database outage")
                self.wait_for_database()

    def postgres_unchanged(self) -> bool:
        assert self.meters is not None
        return self.meters.postgres is None or self.meters.postgres.alive()

    def wait_for_database(self) -> None:
        """Until the service is ready again; then measure the (new) postmaster."""
        assert self.service is not None and self.meters is not None
        deadline = time.monotonic() + OUTAGE_WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(2)
            try:
                ready = httpx.get(f"{self.service.url}/readyz", timeout=5).status_code == 200
                info = self.db(database.server_info(self.url)) if ready else None
            except (httpx.TransportError, OSError, asyncpg.PostgresError):
                continue
            if info is not None:
                self.postmaster = info["postmaster_pid"]
                self.meters.postgres = TreeMeter(self.postmaster) if self.postmaster else None
                time.sleep(2)  # the service's pools reconnect on their next use
                return
        raise RuntimeError(f"the database did not come back within {OUTAGE_WAIT_SECONDS:.0f} s")

    def warm_up(self) -> None:
        """An untimed round of each HTTP path: connections made, statements prepared."""
        self.say("warm-up round (untimed)")
        self.db(database.reset_jobs(self.url))
        jobs = 5000
        self.generate(
            "enqueue",
            [
                {
                    "base_url": self.base_url,
                    "queue": "warmup",
                    "batches": [(i, 1000) for i in range(0, jobs, 1000)],
                    "concurrency": 4,
                }
            ],
        )
        self.generate(
            "drain",
            [
                {
                    "base_url": self.base_url,
                    "queue": "warmup",
                    "workers": self.config.drain_workers,
                    "max_jobs": LEASE_BATCH,
                }
            ],
        )
        self.generate(
            "single",
            [
                {
                    "base_url": self.base_url,
                    "queue": "warmup",
                    "jobs": 200,
                    "concurrency": self.config.single_concurrency,
                }
            ],
        )

    # ---- everything ------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        c = self.config
        started_at = dt.datetime.now(dt.UTC)
        wall = time.monotonic()
        load_before = os.getloadavg()
        busy_before = psutil.cpu_percent(interval=1.0) / 100 * (psutil.cpu_count() or 1)
        if busy_before > BUSY_BEFORE_WARNING_CORES:
            self.notes.append(
                f"the machine was already busy before the run ({busy_before:.2f} cores): "
                "other programs disturb the numbers (see other_cores per scenario)"
            )
        server = database.resolve_server(self.database_url)
        self.say(
            f"PostgreSQL ({server.mode}): {redacted(server.url)}; "
            f"database {c.database_name} (recreated)"
        )
        self.url = self.db(database.recreate(server.url, c.database_name))
        info = self.db(database.server_info(self.url))
        if info["postmaster_pid"] is None:
            self.notes.append("PostgreSQL is not a local process: its CPU is not measured")
        self.postmaster = info["postmaster_pid"]
        with tempfile.TemporaryDirectory(prefix="jobq-bench-") as tmp:
            self.log_dir = Path(tmp)
            service = Service(
                self.url,
                workers=c.workers,
                log_path=Path(tmp) / "service.log",
                extra_env=c.service_env,
            )
            self.say(f"starting jobq serve --workers {c.workers}")
            with service:
                self.service = service
                self.meters = Meters(
                    TreeMeter(service.pid), TreeMeter(self.postmaster) if self.postmaster else None
                )
                if c.warmup and set(c.scenarios) & {"drain", "single", "latency", "lease-levels"}:
                    self.attempt("warm-up", self.warm_up)
                steps: dict[str, Callable[[], None]] = {
                    "bare": self.bare,
                    "drain": self.drain,
                    "single": self.single,
                    "latency": self.latency,
                    "lease-levels": self.lease_levels,
                    "floor": self.floor,
                }
                try:
                    for name in c.scenarios:
                        self.attempt(name, steps[name])
                except Exception:
                    self.console.print(f"[red]service log (tail):[/]\n{service.log_tail()}")
                    raise
                access_lines = service.access_log_lines()
            exit_code = service.process.returncode if service.process else None
        if access_lines:
            self.notes.append(
                f"uvicorn access logging is on in the service ({access_lines:,} lines): it costs "
                "service CPU per request"
            )
        scenarios = self.scenarios
        bare = scenarios.get("bare", {})
        floor = scenarios.get("floor", {})

        def jobs_per_s(node: dict[str, Any] | None) -> float | None:
            return None if not node else float(node["jobs_per_s"])

        drain, single = jobs_per_s(scenarios.get("drain")), jobs_per_s(scenarios.get("single"))
        comparison = {
            # the reference: jobq over HTTP / the bare claim loop
            "drain_vs_bare_batch": ratio(drain, jobs_per_s(bare.get("batch"))),
            "single_vs_bare_single": ratio(single, jobs_per_s(bare.get("single"))),
            # like for like: the bare loop doing what jobq does per job
            "drain_vs_bare_batch_with_finish": ratio(
                drain, jobs_per_s(bare.get("batch_with_finish"))
            ),
            "drain_vs_jobq_sql_batch": ratio(drain, jobs_per_s(bare.get("jobq_sql_batch"))),
            "single_vs_bare_single_with_insert": ratio(
                single, jobs_per_s(bare.get("single_with_insert"))
            ),
            # the HTTP stack's own ceiling: FastAPI + one bare statement per call
            "drain_vs_floor_drain": ratio(drain, jobs_per_s(floor.get("drain"))),
            "single_vs_floor_single": ratio(single, jobs_per_s(floor.get("single"))),
        }
        result: dict[str, Any] = {
            "benchmark": "jobq",
            "report_version": 1,
            "started_at": started_at.isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - wall, 1),
            "machine": {
                **machine_info(load_before),
                "busy_cores_before_start": round(busy_before, 2),
            },
            "database": {
                "mode": server.mode,
                "server": redacted(server.url),
                "database": c.database_name,
                "version": info["version"],
                "settings": info["settings"],
                "cpu_measured": info["postmaster_pid"] is not None,
            },
            "service": {
                "command": f"python -m app serve --workers {c.workers}",
                "workers": c.workers,
                "env": {k: v for k, v in c.service_env.items()},
                "jobq_env": {
                    k: v
                    for k, v in os.environ.items()
                    if k.startswith("JOBQ_") and k != "JOBQ_DATABASE_URL"
                },
                "access_log_lines": access_lines,
                "exit_code": exit_code,
            },
            "config": asdict(c),
            "scenarios": scenarios,
            "comparison": comparison,
            "targets": report.judge(scenarios),
            "notes": sorted(set(self.notes)),
        }
        if self.profiles:
            result["profiles"] = self.profiles
        return result


class DatabaseRestarted(RuntimeError):
    pass


def _outage(exc: BaseException) -> bool:
    """Did this fail because PostgreSQL went away (restarted) rather than a real error?"""
    if isinstance(exc, DatabaseRestarted | OSError | asyncpg.PostgresConnectionError):
        return True
    if isinstance(exc, asyncpg.exceptions.AdminShutdownError | asyncpg.CannotConnectNowError):
        return True
    return bool(_OUTAGE_SIGNS.search(str(exc)))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _git_commit() -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{'-dirty' if dirty else ''}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(load_before: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "cores": psutil.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu_model": _cpu_model(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in load_before],
        "jobq_commit": _git_commit(),
    }


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds like Ctrl-C: the service is stopped on the way out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    config = config_from(args)
    json_to_stdout = args.json == "-"
    progress = Console(stderr=True, highlight=False)
    out = Console(stderr=json_to_stdout, highlight=False)
    for console in (progress, out):
        if not console.is_terminal:
            console.width = REPORT_WIDTH  # a file or a pipe: wide enough for the tables
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    bench = Bench(config, progress, database_url=args.database_url, profile_dir=args.profile)
    try:
        result = bench.run()
    except KeyboardInterrupt:
        progress.print("[red]interrupted[/]")
        return 130
    report.render(result, out)
    if args.json:
        import json

        document = json.dumps(result, indent=2) + "\n"
        if json_to_stdout:
            sys.stdout.write(document)
        else:
            Path(args.json).write_text(document)
            progress.print(f"JSON report: {args.json}")
    failed = [t["key"] for t in result["targets"] if t["pass"] is False]
    return 1 if args.check and failed else 0
