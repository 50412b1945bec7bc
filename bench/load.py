"""Load generators: each runs in a process of its own, on asyncio (uvloop when installed).

`run_generators` starts one process per parameter set, waits until every one has set
up (HTTP connections open, requests built, asyncpg statements ready), reads the
meters, releases them all at once, collects their results and reads the meters again.
So the service's and PostgreSQL's CPU is measured over exactly the loaded window, and
each generator measures its own CPU over its part.

Each HTTP worker or producer is a client of its own: an aiohttp session holding one
keep-alive connection (HTTP/1.1), opened one after the other before the window, so that
with several service processes the connections spread over them as independent clients'
would (a burst of connections tends to be accepted by one process). aiohttp, not httpx:
it costs a generator about a third of the CPU per call (0.43 against 1.46 ms), CPU
that the service and PostgreSQL need on a small machine. Request bodies are built
before the window; answers are only parsed as far as the worker needs (lease tokens
are picked out of the bytes), so the generators spend their CPU on talking to the
service rather than on JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import multiprocessing
import multiprocessing.context
import queue
import random
import re
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any, ClassVar

import aiohttp
import asyncpg

from bench.cpu import Meters, Sample

JSON = {"content-type": "application/json"}
HTTP_TIMEOUT_SECONDS = 120.0
SETUP_TIMEOUT_SECONDS = 300.0
LEASE_TOKEN = re.compile(rb'"lease_id":"([^"]+)"')
ACK_OK = b'"status":200'
EMPTY_LEASES_BEFORE_DONE = 3
CONNECT_GAP_SECONDS = 0.01


class LoadError(RuntimeError):
    pass


# ---- the orchestrating side ------------------------------------------------------------


@dataclass(frozen=True)
class GeneratorRun:
    """What a set of generator processes did, and the meters around it."""

    results: list[dict[str, Any]]
    before: Sample
    after: Sample

    @property
    def started(self) -> float:
        return min(float(r["t0"]) for r in self.results)

    @property
    def generator_cpu_seconds(self) -> float:
        return sum(float(r["cpu_s"]) for r in self.results)

    def total(self, key: str) -> int:
        return sum(int(r[key]) for r in self.results)

    def merged(self, key: str) -> list[float]:
        return [value for r in self.results for value in r[key]]


def run_generators(
    kind: str,
    params: list[dict[str, Any]],
    meters: Meters,
    *,
    timeout: float,
    on_ready: Callable[[], None] | None = None,
) -> GeneratorRun:
    """Run load `kind` in one process per entry of `params`, all released together.

    `on_ready` is called when every generator is set up, just before the window opens.
    """
    context = _context()
    events: multiprocessing.Queue[tuple[Any, ...]] = context.Queue()
    start = context.Event()
    processes = [
        context.Process(
            target=_child_main, args=(kind, index, p, events, start), name=f"bench-{kind}-{index}"
        )
        for index, p in enumerate(params)
    ]
    for process in processes:
        process.start()
    try:
        _await_all(events, processes, "ready", SETUP_TIMEOUT_SECONDS)
        if on_ready is not None:
            on_ready()
        before = meters.sample()
        start.set()
        results = _await_all(events, processes, "result", timeout)
        after = meters.sample()
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
    results.sort(key=lambda r: int(r["index"]))
    return GeneratorRun(results, before, after)


@functools.cache
def _context() -> multiprocessing.context.ForkServerContext:
    """Fresh processes, forked from a server that imported the benchmark once.

    (Spawning each would import it again, seconds per scenario; forking this process
    would copy whatever state it has.)
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.run", "bench.load"])
    return context


def _await_all(
    events: multiprocessing.Queue[tuple[Any, ...]],
    processes: list[Any],
    what: str,
    timeout: float,
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    answers: list[dict[str, Any]] = []
    while len(answers) < len(processes):
        try:
            event = events.get(timeout=1.0)
        except queue.Empty:
            if time.monotonic() > deadline:
                raise LoadError(f"load generators: no {what} within {timeout:.0f} s") from None
            dead = [p.name for p in processes if p.exitcode not in (None, 0)]
            if dead:
                raise LoadError(f"load generator(s) died: {', '.join(dead)}") from None
            continue
        if event[0] == "error":
            raise LoadError(f"load generator {event[1]} failed:\n{event[2]}")
        if event[0] != what:
            raise LoadError(f"load generator {event[1]}: expected {what}, got {event[0]}")
        answers.append(event[2])
    return answers


# ---- the generator side ----------------------------------------------------------------


def _runner() -> asyncio.Runner:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def _child_main(
    kind: str,
    index: int,
    params: dict[str, Any],
    events: multiprocessing.Queue[tuple[Any, ...]],
    start: Event,
) -> None:
    try:
        with _runner() as runner:
            runner.run(_child(kind, index, params, events, start))
    except BaseException:
        events.put(("error", index, traceback.format_exc()))


async def _child(
    kind: str,
    index: int,
    params: dict[str, Any],
    events: multiprocessing.Queue[tuple[Any, ...]],
    start: Event,
) -> None:
    load = LOADS[kind](index, params)
    async with contextlib.AsyncExitStack() as stack:
        await load.setup(stack)
        events.put(("ready", index, {"index": index}))
        await asyncio.get_running_loop().run_in_executor(None, start.wait)
        cpu0, t0 = time.process_time(), time.time()
        data = await load.run()
        t1, cpu1 = time.time(), time.process_time()
    events.put(
        ("result", index, {"index": index, "t0": t0, "t1": t1, "cpu_s": cpu1 - cpu0, **data})
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer, read in full."""

    method: str
    path: str
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class HttpClient:
    """One keep-alive connection to the service: POST and GET, answers read in full."""

    def __init__(self, base_url: str) -> None:
        self._session = aiohttp.ClientSession(
            base_url=base_url,
            headers=JSON,
            connector=aiohttp.TCPConnector(limit=1),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS),
        )

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._session.close()

    async def _request(self, method: str, path: str, content: bytes | None) -> Answer:
        async with self._session.request(method, path, data=content) as answer:
            return Answer(method, path, answer.status, await answer.read())

    async def get(self, path: str) -> Answer:
        return await self._request("GET", path, None)

    async def post(self, path: str, content: bytes) -> Answer:
        return await self._request("POST", path, content)


def http_client(base_url: str) -> HttpClient:
    """A client with one keep-alive connection."""
    return HttpClient(base_url)


def expect(answer: Answer, status: int) -> Answer:
    if answer.status_code != status:
        raise LoadError(f"{answer.method} {answer.path}: {answer.status_code} {answer.text[:500]}")
    return answer


def lease_body(queue: str, worker_id: str, max_jobs: int, wait_seconds: float = 0) -> bytes:
    body: dict[str, Any] = {"queues": [queue], "max_jobs": max_jobs, "worker_id": worker_id}
    if wait_seconds:
        body["wait_seconds"] = wait_seconds
    return json.dumps(body).encode()


def acks_body(tokens: list[bytes]) -> bytes:
    return (
        b'{"acks":['
        + b",".join(b'{"lease_id":"' + t + b'","outcome":"complete"}' for t in tokens)
        + b"]}"
    )


def job_body(payload: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "bench", "payload": payload, **fields}


class Load:
    """One generator process's share of a scenario."""

    def __init__(self, index: int, params: dict[str, Any]) -> None:
        self.index = index
        self.params = params

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        """Everything before the measured window."""

    async def run(self) -> dict[str, Any]:
        raise NotImplementedError


class HttpLoad(Load):
    """Clients, one per concurrent loop (`params[clients_param]` of them)."""

    clients_param: ClassVar[str] = "concurrency"

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.clients: list[HttpClient] = []
        for _ in range(int(self.params[self.clients_param])):
            client = await stack.enter_async_context(http_client(self.params["base_url"]))
            expect(await client.get("/healthz"), 200)  # its connection, open
            self.clients.append(client)
            await asyncio.sleep(CONNECT_GAP_SECONDS)

    @property
    def client(self) -> HttpClient:
        return self.clients[0]


class Enqueue(HttpLoad):
    """Batch enqueue: `concurrency` producers send prebuilt batches of `batch` jobs."""

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        await super().setup(stack)
        self.path = f"/v1/queues/{self.params['queue']}/jobs/batch"
        self.bodies = [
            json.dumps({"jobs": [job_body({"i": i}) for i in range(first, first + size)]}).encode()
            for first, size in self.params["batches"]
        ]
        self.sizes = [size for _, size in self.params["batches"]]

    async def run(self) -> dict[str, Any]:
        work = iter(zip(self.bodies, self.sizes, strict=True))
        latencies: list[float] = []
        jobs = 0

        async def producer(client: HttpClient) -> None:
            nonlocal jobs
            for body, size in work:
                sent = time.perf_counter()
                expect(await client.post(self.path, content=body), 201)
                latencies.append((time.perf_counter() - sent) * 1000)
                jobs += size

        await asyncio.gather(*(producer(client) for client in self.clients))
        return {"jobs": jobs, "requests": len(latencies), "request_ms": latencies}


class Drain(HttpLoad):
    """`workers` workers lease up to `max_jobs` each and ack the batch with one call."""

    clients_param = "workers"

    async def run(self) -> dict[str, Any]:
        counts = {"jobs": 0, "lease_calls": 0, "ack_calls": 0, "empty_leases": 0}
        last_ack = 0.0

        async def worker(number: int, client: HttpClient) -> None:
            nonlocal last_ack
            body = lease_body(
                self.params["queue"], f"bench-{self.index}-{number}", self.params["max_jobs"]
            )
            empty = 0
            while empty < EMPTY_LEASES_BEFORE_DONE:
                leased = expect(await client.post("/v1/leases", content=body), 200)
                counts["lease_calls"] += 1
                tokens = LEASE_TOKEN.findall(leased.content)
                if not tokens:
                    # everything was enqueued before the drain began: an empty answer means
                    # the queue is empty, or its last jobs are being claimed by others
                    counts["empty_leases"] += 1
                    empty += 1
                    await asyncio.sleep(0.01)
                    continue
                empty = 0
                acked = expect(await client.post("/v1/acks", content=acks_body(tokens)), 200)
                counts["ack_calls"] += 1
                if acked.content.count(ACK_OK) != len(tokens):
                    raise LoadError(f"not every ack succeeded: {acked.text[:500]}")
                counts["jobs"] += len(tokens)
                last_ack = time.time()

        await asyncio.gather(*(worker(n, c) for n, c in enumerate(self.clients)))
        return {**counts, "last_done": last_ack}


class Single(HttpLoad):
    """`concurrency` loops of: enqueue one job, lease one job, complete it."""

    async def run(self) -> dict[str, Any]:
        counts = {"jobs": 0, "calls": 0, "empty_leases": 0}
        enqueue = f"/v1/queues/{self.params['queue']}/jobs"
        job = json.dumps(job_body({"i": 0})).encode()

        async def loop(number: int, client: HttpClient, jobs: int) -> None:
            lease = lease_body(self.params["queue"], f"bench-{self.index}-{number}", 1)
            for _ in range(jobs):
                expect(await client.post(enqueue, content=job), 201)
                while True:
                    leased = expect(await client.post("/v1/leases", content=lease), 200)
                    counts["calls"] += 1
                    tokens = LEASE_TOKEN.findall(leased.content)
                    if tokens:
                        break
                    counts["empty_leases"] += 1  # another loop took the job we saw queued
                path = f"/v1/leases/{tokens[0].decode()}/complete"
                expect(await client.post(path, content=b"{}"), 200)
                counts["calls"] += 2
                counts["jobs"] += 1

        shares = split(int(self.params["jobs"]), len(self.clients))
        await asyncio.gather(
            *(
                loop(n, c, share)
                for n, (c, share) in enumerate(zip(self.clients, shares, strict=True))
            )
        )
        return counts


class WaitLatency(HttpLoad):
    """Enqueue-to-lease latency: `workers` long-poll; one producer enqueues a job at a time.

    Each job carries `time.time()` from just before its enqueue request; the worker that
    receives it records the difference, then completes it and waits again.
    """

    clients_param = "clients"

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.params["clients"] = int(self.params["workers"]) + 1  # the producer's is the first
        await super().setup(stack)

    async def run(self) -> dict[str, Any]:
        queue, workers = self.params["queue"], int(self.params["workers"])
        samples, interval = int(self.params["samples"]), float(self.params["interval_s"])
        latencies: list[float] = []
        enqueue_ms: list[float] = []
        path = f"/v1/queues/{queue}/jobs"
        all_arrived = asyncio.Event()

        async def worker(number: int, client: HttpClient) -> None:
            body = lease_body(queue, f"bench-wait-{number}", 1, wait_seconds=20)
            while True:
                leased = expect(await client.post("/v1/leases", content=body), 200)
                received = time.time()
                for lease in leased.json()["leases"]:
                    payload = lease["job"]["payload"]
                    complete = f"/v1/leases/{lease['lease_id']}/complete"
                    expect(await client.post(complete, content=b"{}"), 200)
                    if payload.get("stop"):
                        return
                    latencies.append((received - payload["sent"]) * 1000)
                    if len(latencies) >= samples:
                        all_arrived.set()

        async def producer() -> None:
            await asyncio.sleep(float(self.params["settle_s"]))  # workers are now waiting
            for _ in range(samples):
                sent = time.time()
                body = json.dumps(job_body({"sent": sent})).encode()
                expect(await self.client.post(path, content=body), 201)
                enqueue_ms.append((time.time() - sent) * 1000)
                await asyncio.sleep(interval * random.uniform(0.5, 1.5))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_arrived.wait(), 30)
            stop = json.dumps(job_body({"stop": True}, priority=-1)).encode()
            for _ in range(workers):
                expect(await self.client.post(path, content=stop), 201)

        await asyncio.gather(producer(), *(worker(n, c) for n, c in enumerate(self.clients[1:])))
        return {"jobs": len(latencies), "latency_ms": latencies, "enqueue_ms": enqueue_ms}


class LeaseLatency(HttpLoad):
    """Sequential single-job lease calls against a pool of queued jobs."""

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.params["concurrency"] = 1
        await super().setup(stack)
        queue = self.params["queue"]
        calls, warmup = int(self.params["calls"]), int(self.params["warmup"])
        for size in _chunks(calls + warmup, 1000):
            body = json.dumps({"jobs": [job_body({"i": i}) for i in range(size)]}).encode()
            expect(await self.client.post(f"/v1/queues/{queue}/jobs/batch", content=body), 201)
        self.body = lease_body(queue, "bench-latency", 1)
        for _ in range(warmup):
            await self._lease()

    async def _lease(self) -> float:
        sent = time.perf_counter()
        leased = expect(await self.client.post("/v1/leases", content=self.body), 200)
        elapsed = (time.perf_counter() - sent) * 1000
        if not LEASE_TOKEN.search(leased.content):
            raise LoadError("a lease call found no queued job")
        return elapsed

    async def run(self) -> dict[str, Any]:
        latencies = [await self._lease() for _ in range(int(self.params["calls"]))]
        return {"jobs": len(latencies), "latency_ms": latencies}


BARE_CLAIM = """
WITH claimed AS (
    SELECT id FROM bench_bare WHERE state = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE bench_bare b SET state = 1 FROM claimed WHERE b.id = claimed.id
RETURNING b.id, b.payload
"""
BARE_FINISH_MANY = "UPDATE bench_bare SET state = 2 WHERE id = ANY($1::bigint[])"
BARE_FINISH_ONE = "UPDATE bench_bare SET state = 2 WHERE id = $1"
BARE_INSERT = "INSERT INTO bench_bare (payload) VALUES ($1::jsonb) RETURNING id"


def jobq_statement(name: str) -> tuple[str, tuple[str, ...]]:
    """One of jobq's named statements as asyncpg runs it: SQL with $n, parameter names."""
    from app.jobs import repository

    statement = getattr(repository, name)
    return statement.sql, statement.names


class Bare(Load):
    """SKIP LOCKED loops straight on asyncpg, no HTTP; each statement commits on its own.

    Modes, each of `connections` connections running its own loop:
    - `claim`: the bare claim loop, claiming `batch` jobs per statement from the minimal
      table until it is empty (the reference for what the database allows);
    - `claim_finish`: the same, then one statement marks the claimed jobs done;
    - `insert`: insert one job, claim one, mark it done (jobq's single path, bare);
    - `jobq_sql`: jobq's own LEASE and FINISH statements on its table (complete each
      batch), as the service runs them minus HTTP, FastAPI and SQLAlchemy.
    """

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.connections: list[asyncpg.Connection] = []
        for _ in range(int(self.params["connections"])):
            conn = await asyncpg.connect(self.params["dsn"])
            stack.push_async_callback(conn.close)
            await conn.execute("SELECT 1")
            self.connections.append(conn)

    async def run(self) -> dict[str, Any]:
        batch, mode = int(self.params["batch"]), self.params["mode"]
        counts = {"jobs": 0, "statements": 0}
        last = 0.0

        async def drain(conn: asyncpg.Connection) -> None:
            nonlocal last
            empty = 0
            while empty < EMPTY_LEASES_BEFORE_DONE:
                rows = await conn.fetch(BARE_CLAIM, batch)
                counts["statements"] += 1
                if not rows:
                    empty += 1
                    await asyncio.sleep(0.005)
                    continue
                empty = 0
                if mode == "claim_finish":
                    if batch == 1:
                        await conn.execute(BARE_FINISH_ONE, rows[0]["id"])
                    else:
                        await conn.execute(BARE_FINISH_MANY, [row["id"] for row in rows])
                    counts["statements"] += 1
                counts["jobs"] += len(rows)
                last = time.time()

        lease_sql, lease_names = jobq_statement("LEASE")
        finish_sql, finish_names = jobq_statement("FINISH_MANY")

        async def jobq_sql(conn: asyncpg.Connection, number: int) -> None:
            nonlocal last
            lease = {
                "queues": [self.params["queue"]],
                "types": [],
                "max_jobs": batch,
                "lease_seconds": None,
                "worker_id": f"bench-sql-{number}",
                "key_id": None,  # no API key: authentication is off
            }
            backoff = {"backoff_base": 10.0, "backoff_cap": 3600.0, "backoff_jitter": 0.1}
            empty = 0
            while empty < EMPTY_LEASES_BEFORE_DONE:
                rows = await conn.fetch(lease_sql, *(lease[n] for n in lease_names))
                counts["statements"] += 1
                if not rows:
                    empty += 1
                    await asyncio.sleep(0.005)
                    continue
                empty = 0
                finish = {
                    "job_ids": [row["id"] for row in rows],
                    "lease_ids": [row["lease_id"] for row in rows],
                    "outcomes": ["complete"] * len(rows),
                    "results": [None] * len(rows),
                    "errors": [None] * len(rows),
                    "retryable": [True] * len(rows),
                    "retry_after": [None] * len(rows),
                    "key_id": None,
                    **backoff,
                }
                done = await conn.fetch(finish_sql, *(finish[n] for n in finish_names))
                if len(done) != len(rows):
                    raise LoadError(f"FINISH matched {len(done)} of {len(rows)} leases")
                counts["statements"] += 1
                counts["jobs"] += len(rows)
                last = time.time()

        async def insert_claim_finish(conn: asyncpg.Connection, jobs: int) -> None:
            nonlocal last
            for i in range(jobs):
                await conn.fetchval(BARE_INSERT, json.dumps({"i": i}))
                while not (rows := await conn.fetch(BARE_CLAIM, 1)):
                    counts["statements"] += 1
                await conn.execute(BARE_FINISH_ONE, rows[0]["id"])
                counts["statements"] += 3
                counts["jobs"] += 1
                last = time.time()

        if mode == "insert":
            shares = split(int(self.params["jobs"]), len(self.connections))
            await asyncio.gather(
                *(insert_claim_finish(c, n) for c, n in zip(self.connections, shares, strict=True))
            )
        elif mode == "jobq_sql":
            await asyncio.gather(*(jobq_sql(c, n) for n, c in enumerate(self.connections)))
        else:
            await asyncio.gather(*(drain(c) for c in self.connections))
        return {**counts, "last_done": last}


LOADS: dict[str, Callable[[int, dict[str, Any]], Load]] = {
    "enqueue": Enqueue,
    "drain": Drain,
    "single": Single,
    "wait_latency": WaitLatency,
    "lease_latency": LeaseLatency,
    "bare": Bare,
}


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _chunks(total: int, size: int) -> Iterator[int]:
    while total > 0:
        yield min(size, total)
        total -= size
