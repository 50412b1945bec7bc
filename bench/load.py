"""Load generators: each runs in a process of its own, on asyncio (uvloop when installed).

`run_generators` starts one process per parameter set, waits until every one has set
up (HTTP connections open, requests built), reads the
meters, releases them all at once, collects their results and reads the meters again.
So the service's and PostgreSQL's CPU is measured over exactly the loaded window, and
each generator measures its own CPU over its part.

Each HTTP worker or producer is a client of its own: an aiohttp session holding one
keep-alive connection (HTTP/1.1), opened one after the other before the window, so that
with several service processes the connections spread over them as independent clients'
would (a burst of connections tends to be accepted by one process). aiohttp, not httpx:
it costs a generator a fraction of the CPU per call, CPU that the service and
PostgreSQL need on a small machine. Request bodies are built
before the window; answers are only parsed as far as the worker needs (lease tokens
are picked out of the bytes), so the generators spend their CPU on talking to the
service rather than on JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import multiprocessing.context
import queue
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

from bench.cpu import Meters, Sample
from bench.generators import SETUP_TIMEOUT_SECONDS, Load, LoadError
from bench.http_loads import Drain, Enqueue, Single, WaitLatency
from bench.soak_load import SoakLoad

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
) -> GeneratorRun:
    """Run load `kind` in one process per entry of `params`, all released together."""
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
    context.set_forkserver_preload(["bench.load"])
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


LOADS: dict[str, Callable[[int, dict[str, Any]], Load]] = {
    "enqueue": Enqueue,
    "drain": Drain,
    "single": Single,
    "wait_latency": WaitLatency,
    "soak": SoakLoad,
}
