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
     and one bare statement per call, served like jobq): what the HTTP stack allows;
     then again against the floor answering whole jobs as jobq does (`bench.floor_whole`):
     what the API's answer itself costs;
   - paired: the drain and the single-job path through jobq, the floor and the
     whole-job floor, then enqueue-to-lease through jobq and the floor, back to back,
     in rounds of rotating order: the machine's drift cancels out of each round's
     ratios, and their median judges the targets against the floors.
4. A table on stdout, JSON with `--json PATH` (`-` for stdout, the table then goes to
   stderr); `--check` makes a missed target exit 1.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

import asyncpg
import httpx
import psutil
from rich.console import Console

from app.db.url import redacted
from bench import database, report
from bench.cpu import Meters, TreeMeter
from bench.options import (
    _OUTAGE_SIGNS,
    BUSY_BEFORE_WARNING_CORES,
    LEASE_BATCH,
    OUTAGE_RETRIES,
    OUTAGE_WAIT_SECONDS,
    REPORT_WIDTH,
    config_from,
    parser,
)
from bench.paired import Paired
from bench.service import REPO, Service
from bench.soak import Soak
from bench.stats import ratio


class Bench(Paired, Soak):
    """One run: its scenarios in order, each retried after a database outage, then the report."""

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
                warmed = {"drain", "single", "latency", "lease-levels", "paired"}
                if c.warmup and set(c.scenarios) & warmed:
                    self.attempt("warm-up", self.warm_up)
                steps: dict[str, Callable[[], None]] = {
                    "bare": self.bare,
                    "drain": self.drain,
                    "limited": self.limited,
                    "single": self.single,
                    "latency": self.latency,
                    "lease-levels": self.lease_levels,
                    "dashboard": self.dashboard,
                    "floor": self.floor,
                    "paired": self.paired,
                    "soak": self.soak,
                }
                try:
                    for name in c.scenarios:
                        self.attempt(name, steps[name])
                except Exception:
                    self.console.print("[red]service log (tail):[/]")
                    self.console.print(service.log_tail(), markup=False, highlight=False)
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
        whole = floor.get("whole", {})

        def pg_us(loop: str) -> float | None:
            return report.postgres_us(loop)(scenarios)

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
            # PostgreSQL's CPU per job: jobq's statements, and the minimal ones on a row
            # like jobq's, against the bare claim + finish; jobq's against the latter
            "sql_postgres_cpu_vs_bare": ratio(pg_us("jobq_sql_batch"), pg_us("batch_with_finish")),
            "wide_postgres_cpu_vs_bare": ratio(pg_us("wide_batch"), pg_us("batch_with_finish")),
            "sql_postgres_cpu_vs_wide": ratio(pg_us("jobq_sql_batch"), pg_us("wide_batch")),
            "single_vs_bare_single_with_insert": ratio(
                single, jobs_per_s(bare.get("single_with_insert"))
            ),
            # the HTTP stack's own ceiling: FastAPI + one bare statement per call
            "batch_enqueue_vs_floor": ratio(
                jobs_per_s(scenarios.get("batch_enqueue")), jobs_per_s(floor.get("batch_enqueue"))
            ),
            "drain_vs_floor_drain": ratio(drain, jobs_per_s(floor.get("drain"))),
            "single_vs_floor_single": ratio(single, jobs_per_s(floor.get("single"))),
            # what the API's answer itself costs: the floor answering whole jobs, and jobq
            # against that floor
            "floor_whole_vs_floor_drain": ratio(
                jobs_per_s(whole.get("drain")), jobs_per_s(floor.get("drain"))
            ),
            "floor_whole_vs_floor_single": ratio(
                jobs_per_s(whole.get("single")), jobs_per_s(floor.get("single"))
            ),
            "drain_vs_floor_whole_drain": ratio(drain, jobs_per_s(whole.get("drain"))),
            "single_vs_floor_whole_single": ratio(single, jobs_per_s(whole.get("single"))),
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
