"""The run's knobs: its constants, command-line options and how it reports progress."""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DATABASE = "jobq_chaos"
PG_DIRNAME = "pg"  # the embedded server's home in the run directory
CI_JOBS = 5_000
BIG_JOBS = 50_000
SERVICES = 3
RESERVED_JOBS = 101  # enqueued by the harness itself, through a crash: 1 alone, 100 in a batch
BLOCKED_TIMEOUT_SECONDS = 10.0
RESTART_ATTEMPTS = 3
SERVICE_ENV = {
    "JOBQ_REAPER_INTERVAL_SECONDS": "0.5",
    "JOBQ_SCHEDULER_INTERVAL_SECONDS": "0.5",
    "JOBQ_BACKOFF_BASE_SECONDS": "0.05",
    "JOBQ_BACKOFF_CAP_SECONDS": "0.5",
    "JOBQ_MIGRATE_ON_START": "false",
    "JOBQ_LOG_FORMAT": "text",  # the reaper's lines are parsed from the services' logs
    "JOBQ_MAX_DEPENDENCY_DEPTH": "1000",  # room for the workflow load's deep chain
    # the push load's endpoint listens on loopback (`chaos.push`)
    "JOBQ_PUSH_ALLOWED_TARGETS": "http://127.0.0.1:*",
    "JOBQ_PUSH_LEASE_MARGIN_SECONDS": "2",  # a delivery cut short comes back in seconds
    "JOBQ_PUSH_BREAKER_PAUSE_SECONDS": "0.2",
    "JOBQ_PUSH_BREAKER_MAX_PAUSE_SECONDS": "1",
    "JOBQ_SUBSCRIPTION_TIMEOUT_SECONDS": "1",
    "JOBQ_SUBSCRIPTION_BACKOFF_BASE_SECONDS": "0.05",
    "JOBQ_SUBSCRIPTION_BACKOFF_CAP_SECONDS": "0.5",
}
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
PROGRESS_EVERY_SECONDS = 3.0
HANG_SECONDS = 5.0  # a probe answered slower than this, outage or not, is a hang
# A probe sent while PostgreSQL is down is answered within this. The slowest seen was
# 1.3 s on a 2-core machine under load; a request that waited for the pool's connect
# (5 s) or checkout (10 s) timeout would take longer.
FAIL_FAST_SECONDS = 3.0
RECOVERY_TIMEOUT_SECONDS = 30.0
# PostgreSQL stays stopped until every service has answered both probes 503, at most this long
OUTAGE_HOLD_SECONDS = 10.0
OUTAGE_GRACE_SECONDS = 5.0  # clients' 503s this long after the restart still belong to it
PROBES = {"jobs": "/v1/jobs?limit=1", "readyz": "/readyz"}  # a database read; readiness
UNAVAILABLE = "database_unavailable"
READYZ_503_CODES = (UNAVAILABLE, "reaper_stalled")  # the reaper misses passes in an outage
INTERRUPTED_ENQUEUES = 2  # one enqueue and one batch, waiting in PostgreSQL as a service dies
CLOCK_SLACK_SECONDS = 0.002  # database and Python clocks: same host, microsecond rounding
FAULT_SLACK_SECONDS = 2.0  # a lease answer this close to a crash may have been lost
STOP_SLACK_SECONDS = 0.5  # a reap this close to a service's stop may have lost its log line
# ... and one whose transaction began this long before the stop, on a loaded machine (seen:
# 0.73 s from the reap's start to a SIGKILL, with two test runs side by side on 2 cores)
REAP_LOG_SECONDS = 3.0
CRASHES = ("worker_sigkill", "service_sigkill", "rolling_restart", "postgres_restart")
EXAMPLES = 5  # examples kept per kind of violation
REAPED = re.compile(
    r"^\S+ \S+ INFO jobq\.reaper: reaped replica=(?P<replica>\S+)"
    r" batch_started=(?P<started>[0-9.]+) batch_ended=(?P<ended>[0-9.]+)"
    r" requeued=(?P<requeued>\d+) failed=(?P<failed>\d+) job_ids=(?P<ids>[0-9,]*)\s*$"
)


class HarnessError(Exception):
    """The run could not be carried out (as opposed to an invariant that broke)."""


def say(message: str) -> None:
    print(message, flush=True)


# ---- options ---------------------------------------------------------------------------


@dataclass(slots=True)
class Options:
    jobs: int
    workers: int
    producers: int
    seed: int
    database_url: str | None
    pg_stop_cmd: list[str] | None
    pg_start_cmd: list[str] | None
    run_dir: Path | None
    keep: bool
    json_path: Path | None
    produce_seconds: float
    worker_kills: int
    timeout: float

    @property
    def run(self) -> str:
        return f"r{self.seed}"


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tests.processes.chaos", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, help=f"jobs to enqueue [default {CI_JOBS}]")
    parser.add_argument("--big", action="store_true", help=f"the big run: {BIG_JOBS} jobs")
    parser.add_argument("--workers", type=int, help="worker processes [default 4, big 6]")
    parser.add_argument("--producers", type=int, default=2, help="producer processes")
    parser.add_argument("--seed", type=int, help="seed of the job mix and the faults")
    parser.add_argument("--json", type=Path, dest="json_path", help="write the summary here")
    parser.add_argument("--run-dir", type=Path, help="logs and data [default: a temp dir]")
    parser.add_argument("--keep", action="store_true", help="keep the run dir even on success")
    parser.add_argument("--pg-stop-cmd", help="command that stops the JOBQ_DATABASE_URL server")
    parser.add_argument("--pg-start-cmd", help="command that starts it again")
    parser.add_argument(
        "--produce-seconds", type=float, help="how long producers spread their jobs over"
    )
    parser.add_argument("--worker-kills", type=int, help="workers to SIGKILL [default 3]")
    parser.add_argument("--timeout", type=float, help="give the load this long to finish")
    args = parser.parse_args(argv)
    if bool(args.pg_stop_cmd) != bool(args.pg_start_cmd):
        parser.error("--pg-stop-cmd and --pg-start-cmd go together")
    jobs = args.jobs or (BIG_JOBS if args.big else CI_JOBS)
    produce = args.produce_seconds or max(20.0, jobs / 250)
    return Options(
        jobs=jobs,
        workers=args.workers or (6 if jobs > CI_JOBS else 4),
        producers=args.producers,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        database_url=os.environ.get("JOBQ_DATABASE_URL") or None,
        pg_stop_cmd=shlex.split(args.pg_stop_cmd) if args.pg_stop_cmd else None,
        pg_start_cmd=shlex.split(args.pg_start_cmd) if args.pg_start_cmd else None,
        run_dir=args.run_dir,
        keep=args.keep,
        json_path=args.json_path,
        produce_seconds=produce,
        worker_kills=args.worker_kills or max(3, jobs // 10_000),
        timeout=args.timeout or max(200.0, jobs / 60 + 60),  # the faults include a deep chain
    )


# ---- the database ----------------------------------------------------------------------
