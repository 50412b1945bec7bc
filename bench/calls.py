"""Instructions per call: the single-job loop in-process, under Valgrind's callgrind.

The benchmark's timings move by 10-50 % from run to run on a shared machine, and a
change of 5 % to the service's per-request work hides in that noise. Instructions do
not move: this drives an app in-process (ASGI messages built by hand: no socket, no
uvicorn, no other process) through loops of the single-job path (enqueue one job, lease
it, complete it) under `valgrind --tool=callgrind`, and reports the instructions of one
call. Valgrind counts only the loops: the process starts with its instrumentation off
(start-up and imports run some twice as fast, and are never counted), warms up, then
has it turned on (`callgrind_control`), runs a few loops more (so that the simulated
caches warm too), zeroes the counters, runs `--loops` loops and dumps them. Every
counted process runs with one hash seed (`PYTHONHASHSEED=0`), so that runs lay out
their dicts alike: repeatable to about 0.5 %.

    python -m bench.calls                      jobq, and the floor answering whole jobs
    python -m bench.calls --app jobq --app floor
    python -m bench.calls --http --workers 2   through HTTP: `jobq serve`, uvicorn
    python -m bench.calls --cache              level-1 cache misses per call too
    python -m bench.calls --path drain         per job of the drain: lease 100, one ack call

`--path drain` counts the drain instead (a lease of 100 jobs, then one `/v1/acks` call
completing them), per job: the jobs are queued straight in SQL before each run, as the
benchmark's drain does, so only the lease and the acks are counted.

`--http` counts the served processes instead (`jobq serve --workers N`, or the floor
under uvicorn as the benchmark runs it, with every worker process), while a client here
drives the same loops through a socket: uvicorn, its HTTP parser and the sockets count
too. PostgreSQL's own work is not counted (it is another process). Needs Valgrind
(Debian's `valgrind`, with its `callgrind_control`); the database is the benchmark's
(`--database-url` or `JOBQ_DATABASE_URL`, else the embedded server), in a database of
its own, recreated.

Instructions are not seconds: a call that runs through more distinct code misses the
processor's instruction cache more often, and CPython's calls then take longer than
their instructions say. `--cache` has callgrind simulate the caches too (several
times slower) and adds each call's level-1 instruction and data misses.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any, Literal

import httpx
import psutil

from bench import database
from bench.floor import ANSWER_VARIABLE, DSN_VARIABLE
from bench.floor_whole import WIDE_TABLE
from bench.generators import ACK_OK, LEASE_TOKEN, acks_body, job_body, lease_body
from bench.service import REPO, Service

App = Literal["jobq", "floor", "whole"]
APPS: tuple[App, ...] = ("jobq", "floor", "whole")
CallPath = Literal["single", "drain"]
PATHS: tuple[CallPath, ...] = ("single", "drain")
QUEUE = "calls"
WARMUP_LOOPS = 20  # before Valgrind counts anything: its instrumentation is off
COUNTED_WARMUP_LOOPS = 2  # instrumented, then zeroed: the simulated caches warm too
CALLS_PER_LOOP = 3
DRAIN_BATCH = 100  # jobs a drain loop leases, then acks in one call
Counts = dict[str, int]
# What `callgrind_control` has Valgrind do at each step of a count, in turn.
INSTRUMENT, ZERO, DUMP = "--instr=on", "--zero", "--dump=loops"
CONTROL_TIMEOUT_SECONDS = 120.0
STEP_PREFIX = "callgrind_control "  # a driven process's request to its parent


def valgrind(cache: bool, folder: Path) -> tuple[str, ...]:
    """callgrind, its instrumentation off until `INSTRUMENT`, its dumps in `folder`;
    with `cache`, the level-1 caches simulated too."""
    simulate = "--cache-sim=yes" if cache else "--cache-sim=no"
    return (
        *("valgrind", "--tool=callgrind", "--instr-atstart=no", simulate),
        f"--callgrind-out-file={folder}/callgrind.%p",
    )


def control(pids: Iterable[int], step: str) -> None:
    """Have each callgrind process in `pids` take `step` (through vgdb, answered)."""
    for pid in pids:
        done = subprocess.run(  # noqa: S603 - Valgrind's own script
            ["callgrind_control", step, str(pid)],  # noqa: S607 - installed with Valgrind
            capture_output=True,
            text=True,
            timeout=CONTROL_TIMEOUT_SECONDS,
        )
        if done.returncode != 0 or "OK." not in done.stdout:
            raise SystemExit(f"callgrind_control {step} {pid}: {done.stdout}{done.stderr}")


def dumped(folder: Path, cache: bool) -> list[Counts]:
    """Each process's counters of the loops: the dumps `DUMP` wrote (callgrind.PID.1)."""
    return [counts(dump.read_text(), cache) for dump in sorted(folder.glob("callgrind.*.1"))]


def counts(dump: str, cache: bool) -> Counts:
    """The counters of one callgrind dump, from its `events:` and `summary:` lines."""
    events = re.search(r"^events: (.+)$", dump, re.MULTILINE)
    summary = re.search(r"^summary: (.+)$", dump, re.MULTILINE)
    if events is None or summary is None:
        raise SystemExit(f"not a callgrind dump: {dump[:300]!r}")
    # a cost line leaves out its trailing zeros
    names, numbers = events.group(1).split(), map(int, summary.group(1).split())
    values = dict(itertools.zip_longest(names, numbers, fillvalue=0))
    found = {"instructions": values["Ir"]}
    if cache:
        found["I1 misses"] = values["I1mr"]
        found["D1 misses"] = values["D1mr"] + values["D1mw"]
    return found


HTTP_TIMEOUT_SECONDS = 120.0  # a call under Valgrind runs some 50 times slower
VALGRIND_START_SECONDS = 300.0  # and so does the service's start
JSON = {"content-type": "application/json"}
# jobq's periodic passes run by the clock, not by the calls: under Valgrind's slowness
# they would add to a run in proportion to its time. Each runs once, at start.
QUIET_MAINTENANCE = {
    "JOBQ_REAPER_INTERVAL_SECONDS": "3600",
    "JOBQ_PRUNE_INTERVAL_SECONDS": "3600",
    "JOBQ_SCHEDULER_INTERVAL_SECONDS": "3600",
    "JOBQ_VACUUM_INTERVAL_SECONDS": "0",
}
# One hash seed for every counted process: with Python's random one, each run lays out
# its dicts and sets differently, and a call's count moved by 2.6 % between runs of the
# same code (907k-931k); with this one, by 0.2 % in one database.
FIXED_HASH_SEED = {"PYTHONHASHSEED": "0"}
Asgi = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def _scope(path: str, body: bytes) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


Post = Callable[[str, bytes, int], Awaitable[bytes]]


async def _drain_loops(post: Post, times: int) -> None:
    """`times` loops of the drain: lease 100 queued jobs, complete them in one ack call."""
    lease = lease_body(QUEUE, "calls", DRAIN_BATCH)
    for _ in range(times):
        tokens = LEASE_TOKEN.findall(await post("/v1/leases", lease, 200))
        if len(tokens) != DRAIN_BATCH:
            raise SystemExit(f"a lease found {len(tokens)} jobs, not {DRAIN_BATCH}")
        acked = await post("/v1/acks", acks_body(tokens), 200)
        if acked.count(ACK_OK) != DRAIN_BATCH:
            raise SystemExit(f"not every ack succeeded: {acked[:300]!r}")


async def _loops(post: Post, times: int) -> None:
    """`times` loops of the single-job path: enqueue one job, lease it, complete it."""
    job = json.dumps(job_body({"i": 0})).encode()  # the benchmark's single-job bodies
    lease = lease_body(QUEUE, "calls", 1)
    for _ in range(times):
        await post(f"/v1/queues/{QUEUE}/jobs", job, 201)
        found = LEASE_TOKEN.search(await post("/v1/leases", lease, 200))
        if found is None:
            raise SystemExit("a lease found no job")
        await post(f"/v1/leases/{found.group(1).decode()}/complete", b"{}", 200)


async def _post(app: Asgi, path: str, body: bytes, status: int) -> bytes:
    """One POST through the app; its body, if it answered `status`."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    answer: dict[str, Any] = {"status": None, "body": b""}

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(_scope(path, body), receive, send)
    if answer["status"] != status:
        raise SystemExit(f"POST {path}: {answer['status']} {answer['body'][:300]!r}")
    return bytes(answer["body"])


def _floor_env(name: App) -> dict[str, str]:
    """The floor's answer: whole jobs for `whole`, else its own."""
    return {ANSWER_VARIABLE: "whole"} if name == "whole" else {}


def _build(name: App, url: str) -> Asgi:
    """The app, configured from the environment as its service would be."""
    if name == "jobq":
        os.environ["JOBQ_DATABASE_URL"] = url
        os.environ["JOBQ_MIGRATE_ON_START"] = "false"
        # as under `jobq serve --workers N`: the metrics live in files
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="jobq-calls-")
        from app.cli.serve import frozen
        from app.main import create_app

        return frozen(create_app(run_maintenance=False))  # as `jobq serve` freezes it
    os.environ[DSN_VARIABLE] = database.dsn(url)
    os.environ.update(_floor_env(name))
    from bench.floor import create_app as create_floor

    return create_floor()


LOOPS: dict[CallPath, Callable[[Post, int], Awaitable[None]]] = {
    "single": _loops,
    "drain": _drain_loops,
}


Step = Callable[[str], Awaitable[None]]


async def count_loops(post: Post, path: CallPath, loops: int, step: Step) -> None:
    """The warm-up, uncounted, then `loops` loops, counted: `step` has callgrind turn
    its instrumentation on, zero its counters and dump them, in turn."""
    run = LOOPS[path]
    await run(post, WARMUP_LOOPS)
    await step(INSTRUMENT)
    await run(post, COUNTED_WARMUP_LOOPS)
    await step(ZERO)
    await run(post, loops)
    await step(DUMP)


async def _queue_jobs(name: App, url: str, path: CallPath, loops: int) -> None:
    """Before a run of the drain: the jobs its warm-up and loops lease, queued straight
    in SQL in the app's table (emptied first), as the benchmark's drain has them."""
    if path != "drain":
        return
    jobs = (WARMUP_LOOPS + COUNTED_WARMUP_LOOPS + loops) * DRAIN_BATCH
    if name == "floor":
        await database.prepare_bare(url, jobs)
    else:
        await database.queue_jobs(url, QUEUE, jobs, "jobq.jobs" if name == "jobq" else WIDE_TABLE)


async def _ask_parent(step: str) -> None:
    """In the driven process: have the counting process take `step` on this one; wait.
    (The loop stands still meanwhile: nothing runs in this process but the calls.)"""
    print(f"{STEP_PREFIX}{step}", flush=True)
    if not sys.stdin.readline():
        raise SystemExit("the counting process went away")


async def drive(name: App, url: str, path: CallPath, loops: int) -> None:
    """The driven process: start the app (its lifespan), run the warm-up and `loops`
    loops, the counting process told of each step; stop it."""
    app = _build(name, url)
    async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
        await count_loops(functools.partial(_post, app), path, loops, _ask_parent)


def _tree(pid: int) -> list[int]:
    """A process and all its descendants (the service and its worker processes)."""
    parent = psutil.Process(pid)
    return [pid, *(child.pid for child in parent.children(recursive=True))]


async def _drive_http(service: Service, path: CallPath, loops: int) -> list[int]:
    """The warm-up and `loops` loops through HTTP, on one kept-alive connection, each
    step taken by every served process; their pids."""
    pids: list[int] = []
    async with httpx.AsyncClient(base_url=service.url, timeout=HTTP_TIMEOUT_SECONDS) as client:

        async def post(path: str, body: bytes, status: int) -> bytes:
            answer = await client.post(path, content=body, headers=JSON)
            if answer.status_code != status:
                raise SystemExit(f"POST {path}: {answer.status_code} {answer.text[:300]}")
            return answer.content

        async def step(step: str) -> None:
            if not pids:  # after the warm-up: every worker process has started
                pids.extend(_tree(service.pid))
            await asyncio.to_thread(control, pids, step)

        await count_loops(post, path, loops, step)
    return pids


def served_instructions(
    name: App, url: str, path: CallPath, loops: int, workers: int, cache: bool
) -> Counts:
    """Counters of the served processes (all of them) while `loops` loops go through
    HTTP: the service started under Valgrind, driven from here, stopped."""
    asyncio.run(_queue_jobs(name, url, path, loops))
    with tempfile.TemporaryDirectory(prefix="jobq-calls-") as folder:
        log = Path(folder) / "service.log"
        service = Service(
            url,
            workers=workers,
            log_path=log,
            app="jobq" if name == "jobq" else "floor",
            extra_env={
                **FIXED_HASH_SEED,
                **(QUIET_MAINTENANCE if name == "jobq" else _floor_env(name)),
            },
            wrapper=(*valgrind(cache, Path(folder)), "--trace-children=yes"),
            start_timeout=VALGRIND_START_SECONDS,
        )
        with service:
            pids = asyncio.run(_drive_http(service, path, loops))
        # uvicorn alone ends a SIGTERM by raising it again, once shut down cleanly
        if service.stop() not in (0, -signal.SIGTERM):
            raise SystemExit(f"{name} under valgrind failed:\n{service.log_tail()}")
        counted = dumped(Path(folder), cache)
    if len(counted) != len(pids) or len(counted) < 1 + (workers if workers > 1 else 0):
        raise SystemExit(f"{name} under valgrind: {len(counted)} of {len(pids)} processes counted")
    return {key: sum(process[key] for process in counted) for key in counted[0]}


def instructions(name: App, url: str, path: CallPath, loops: int, cache: bool) -> Counts:
    """Counters of `loops` loops of `name`, driven in a process of their own."""
    asyncio.run(_queue_jobs(name, url, path, loops))
    with tempfile.TemporaryDirectory(prefix="jobq-calls-") as folder:
        log = Path(folder) / "valgrind.log"
        command = [
            *valgrind(cache, Path(folder)),
            *(sys.executable, "-m", "bench.calls", "--drive", name, "--loops", str(loops)),
            *("--path", path, "--database-url", url),
        ]
        with (
            log.open("w") as errors,
            subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command,
                cwd=REPO,
                env={**os.environ, **FIXED_HASH_SEED},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            ) as driven,
        ):
            assert driven.stdin is not None and driven.stdout is not None
            # on an error, leaving this closes its stdin: it stops waiting, and exits
            for line in driven.stdout:
                if line.startswith(STEP_PREFIX):
                    control([driven.pid], line.removeprefix(STEP_PREFIX).strip())
                    driven.stdin.write("\n")
                    driven.stdin.flush()
        counted = dumped(Path(folder), cache)
        if driven.returncode != 0 or len(counted) != 1:
            raise SystemExit(f"{name} under valgrind failed:\n{log.read_text()[-2000:]}")
    return counted[0]


def per_call(counted: Counts, calls: int) -> Counts:
    """Counters per call, of `calls` counted."""
    return {key: round(value / calls) for key, value in counted.items()}


def _line(name: str, counts: Counts, unit: str) -> str:
    """`jobq  910,512 instructions per call`, and the cache misses when counted."""
    misses = [f"{value:,} {key}" for key, value in counts.items() if key != "instructions"]
    extra = f" ({', '.join(misses)})" if misses else ""
    return f"{name:6s} {counts['instructions']:>10,} instructions per {unit}{extra}"


async def _prepare(server_url: str, name: str) -> str:
    url = await database.recreate(server_url, name)
    await database.prepare_wide(url)
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.calls",
        description="Instructions per call of the single-job loop (enqueue, lease, "
        "complete), or per job of the drain, under Valgrind's callgrind: the app driven "
        "in-process, or (--http) the served processes driven through HTTP.",
    )
    parser.add_argument(
        "--app",
        action="append",
        choices=APPS,
        help="jobq; floor (the framework floor); whole (the floor answering whole jobs) "
        "[default: jobq and whole]",
    )
    parser.add_argument(
        "--path",
        choices=PATHS,
        default="single",
        help="single: enqueue, lease, complete, per call; drain: a lease of 100 and one "
        "ack call, per job [default: single]",
    )
    parser.add_argument(
        "--loops", type=int, help="loops [default: 400 single, 100 drain (of 100 jobs)]"
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="count the served processes, driven through HTTP (uvicorn and sockets included)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="with --http: service processes [default: 1]"
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="simulate the caches too: level-1 instruction and data misses per call "
        "(slower; a larger program's calls miss more, and take longer than their "
        "instructions alone say)",
    )
    parser.add_argument("--database-url", help="PostgreSQL server [default: as the benchmark]")
    parser.add_argument(
        "--database-name",
        default="jobq_bench_calls",
        help="its database, DROPPED and recreated [default: jobq_bench_calls]",
    )
    parser.add_argument("--drive", choices=APPS, help=argparse.SUPPRESS)  # the measured process
    args = parser.parse_args(argv)
    if args.drive:
        asyncio.run(drive(args.drive, args.database_url, args.path, args.loops))
        return 0
    if shutil.which("valgrind") is None:
        parser.error("needs Valgrind: apt-get install valgrind")
    server = database.resolve_server(args.database_url)
    url = asyncio.run(_prepare(server.url, args.database_name))
    drain = args.path == "drain"
    loops = args.loops or (100 if drain else 400)
    for name in args.app or ["jobq", "whole"]:
        if args.http:
            counted = served_instructions(
                name, url, args.path, loops, workers=args.workers, cache=args.cache
            )
        else:
            counted = instructions(name, url, args.path, loops, cache=args.cache)
        calls = loops * (DRAIN_BATCH if drain else CALLS_PER_LOOP)
        print(_line(name, per_call(counted, calls), "job" if drain else "call"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
