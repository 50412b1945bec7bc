"""`python -m bench`: jobq's benchmark, end to end, in one command.

1. A dedicated database (`jobq_bench`; `--database-name`) on the configured server
   (`--database-url`, else `JOBQ_DATABASE_URL`, else the embedded server) is dropped,
   created and migrated: runs are comparable and no user data is touched.
2. `jobq serve --workers N` starts as a subprocess on it, and is always stopped with
   SIGTERM at the end.
3. The scenarios (`STEPS`), each from an emptied jobs table, load coming from separate
   generator processes (`bench.load`), CPU of the service, PostgreSQL and the generators
   measured over each loaded window (`bench.cpu`):
   - drain: batch-enqueue N jobs (timed: batch enqueue), then W workers lease 100 at a
     time and ack each batch with one `/v1/acks` call (timed: drain);
   - limited: the drain of a queue whose `max_running` binds;
   - single: enqueue, lease and complete one job per call;
   - latency: enqueue-to-lease latency with workers already long-polling;
   - floor: the drain, the single-job path and enqueue-to-lease through jobq and through
     the framework floor (`bench.floor`), back to back in rounds (`bench.references`);
   - prune (`--only prune`): the pruner deleting `--prune-rows` finished jobs beside a
     lease load, without and with its rest between batches (`bench.prune`);
   - push (`--only push`): one replica's dispatcher delivering to a local endpoint,
     beside a plain httpx client's floor, and enqueue to delivery (`bench.push`);
   - soak (`--soak MINUTES`): a steady load with retention on, sampled (`bench.soak`).
4. A table on stdout (`bench.report`), JSON with `--json PATH` (`-` for stdout, the
   table then goes to stderr); `--check` makes a missed target exit 1.
"""

from __future__ import annotations

import datetime as dt
import json
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

import psutil
from rich.console import Console

from app.db.url import redacted
from bench import database, report, scenarios
from bench.base import Bench
from bench.fair import fair
from bench.options import REPORT_WIDTH, Config, config_from, parser
from bench.prune import prune
from bench.push import push
from bench.references import floor
from bench.scale import scale
from bench.service import REPO, Service
from bench.soak import soak

STEPS: dict[str, Callable[[Bench], None]] = {
    "drain": scenarios.drain,
    "limited": scenarios.limited,
    "single": scenarios.single,
    "latency": scenarios.latency,
    "floor": floor,
    "fair": fair,
    "prune": prune,
    "push": push,
    "soak": soak,
    "scale": scale,
}
WARMED = {"drain", "single", "latency", "floor"}  # the scenarios an untimed round steadies
BUSY_BEFORE_WARNING_CORES = 0.25


def run(config: Config, console: Console, database_url: str | None) -> dict[str, Any]:
    """Every scenario of `config` against a `jobq serve` of its own; the report."""
    c = config
    started_at = dt.datetime.now(dt.UTC)
    wall = time.monotonic()
    load_before = os.getloadavg()
    busy_before = psutil.cpu_percent(interval=1.0) / 100 * (psutil.cpu_count() or 1)
    server = database.resolve_server(database_url)
    with tempfile.TemporaryDirectory(prefix="jobq-bench-") as tmp:
        bench = Bench(config, console, Path(tmp))
        if busy_before > BUSY_BEFORE_WARNING_CORES:
            bench.notes.append(
                f"the machine was already busy before the run ({busy_before:.2f} cores): "
                "other programs disturb the numbers (see other_cores per scenario)"
            )
        bench.say(
            f"PostgreSQL ({server.mode}): {redacted(server.url)}; "
            f"database {c.database_name} (recreated)"
        )
        bench.url = bench.db(database.recreate(server.url, c.database_name))
        info = bench.db(database.server_info(bench.url))
        bench.postmaster = info["postmaster_pid"]
        if bench.postmaster is None:
            bench.notes.append("PostgreSQL is not a local process: its CPU is not measured")
        service = Service(
            bench.url,
            workers=c.workers,
            log_path=Path(tmp) / "service.log",
            extra_env=c.service_env,
        )
        with service, bench.serving(service):
            bench.say(f"jobq serve --workers {c.workers} started (pid {service.pid})")
            try:
                if c.warmup and WARMED & set(c.scenarios):
                    scenarios.warm_up(bench)
                for name in c.scenarios:
                    STEPS[name](bench)
            except Exception:
                console.print("[red]service log (tail):[/]")
                console.print(service.log_tail(), markup=False, highlight=False)
                raise
            access_lines = service.access_log_lines()
        exit_code = service.process.returncode if service.process else None
    if access_lines:
        bench.notes.append(
            f"uvicorn access logging is on in the service ({access_lines:,} lines): it costs "
            "service CPU per request"
        )
    return {
        "benchmark": "jobq",
        "report_version": 2,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - wall, 1),
        "machine": {**machine_info(load_before), "busy_cores_before_start": round(busy_before, 2)},
        "database": {
            "mode": server.mode,
            "server": redacted(server.url),
            "database": c.database_name,
            "version": info["version"],
            "settings": info["settings"],
            "cpu_measured": bench.postmaster is not None,
        },
        "service": {
            "command": f"python -m app serve --workers {c.workers}",
            "workers": c.workers,
            "env": c.service_env,
            "jobq_env": {
                k: v
                for k, v in os.environ.items()
                if k.startswith("JOBQ_") and k != "JOBQ_DATABASE_URL"
            },
            "access_log_lines": access_lines,
            "exit_code": exit_code,
        },
        "config": asdict(c),
        "scenarios": bench.scenarios,
        "targets": report.judge(bench.scenarios),
        "notes": sorted(set(bench.notes)),
    }


def _git_commit() -> str | None:
    def git(*args: str) -> str:
        return subprocess.run(  # noqa: S603 - git, with our arguments
            ["git", *args],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
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
    try:
        result = run(config, progress, args.database_url)
    except KeyboardInterrupt:
        progress.print("[red]interrupted[/]")
        return 130
    report.render(result, out)
    if args.json:
        document = json.dumps(result, indent=2) + "\n"
        if json_to_stdout:
            sys.stdout.write(document)
        else:
            Path(args.json).write_text(document)
            progress.print(f"JSON report: {args.json}")
    failed = [t["key"] for t in result["targets"] if t["pass"] is False]
    return 1 if args.check and failed else 0
