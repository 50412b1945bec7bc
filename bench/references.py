"""The framework floor's scenario: jobq and the floor (`bench.floor`) back to back.

The floor is FastAPI on uvicorn answering the same calls with one bare statement each:
what the HTTP stack allows. This machine's speed drifts by tens of percent within
minutes, so loads run minutes apart carry that drift into their ratio. Here the loads
run one right after the other, in a rotating order, for `--floor-rounds` rounds: the
drain and the single-job path through jobq and through the floor, then enqueue-to-lease
with workers waiting through both. Each round gives its ratios, and their median judges
the targets against the floor. Both services stay up throughout, idle while the other
serves.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench import database
from bench.base import Bench
from bench.scenarios import run_drain, run_single, run_wait_latency, succeeded
from bench.service import Service
from bench.stats import ratio

LEGS = ("jobq", "floor")
QUEUE = "bench-floor"
WARMUP_JOBS = 200  # through the floor before the rounds (jobq's warm-up is the run's)


def floor(bench: Bench) -> None:
    c = bench.config
    bench.say(
        f"jobq and the framework floor back to back, {c.floor_rounds} round(s): the drain "
        f"({c.floor_drain_jobs:,} jobs, {c.drain_workers} workers), the single-job path "
        f"({c.floor_single_jobs:,} jobs, {c.single_concurrency} loops), enqueue-to-lease "
        f"({c.latency_samples} jobs, {c.latency_workers} workers waiting)"
    )
    served = Service(
        bench.url, workers=c.workers, log_path=bench.log_dir / "floor.log", app="floor"
    )
    with served:
        services = {"jobq": bench.service, "floor": served}
        _empty(bench, "floor")
        with bench.serving(served):
            run_single(bench, QUEUE, WARMUP_JOBS)
        rounds = [_round(bench, number, services) for number in range(c.floor_rounds)]
    bench.scenarios["floor"] = {
        "drain_jobs": c.floor_drain_jobs,
        "drain_workers": c.drain_workers,
        "single_jobs": c.floor_single_jobs,
        "single_concurrency": c.single_concurrency,
        "latency_samples": c.latency_samples,
        "rounds": rounds,
        "median": {
            part: {key: statistics.median(r[part][key] for r in rounds) for key in keys}
            for part, keys in (
                ("drain", (*LEGS, "vs_floor")),
                ("single", (*LEGS, "vs_floor")),
                ("wait", ("p50_vs_floor", "p99_vs_floor")),
            )
        },
    }


def _round(bench: Bench, number: int, services: dict[str, Service]) -> dict[str, Any]:
    order = LEGS[number % 2 :] + LEGS[: number % 2]
    figures: dict[str, Any] = {}
    for load in ("drain", "single"):
        runs = {leg: _load(bench, load, leg, services[leg]) for leg in order}
        figures[load] = {
            "order": list(order),
            **{leg: runs[leg]["jobs_per_s"] for leg in LEGS},
            "vs_floor": ratio(runs["jobq"]["jobs_per_s"], runs["floor"]["jobs_per_s"]),
            "cpu": {leg: runs[leg]["cpu"] for leg in LEGS},
        }
    waits = {}
    for leg in order:
        _empty(bench, leg)
        with bench.serving(services[leg]):
            waits[leg] = run_wait_latency(bench, f"{QUEUE}-wait", floor=leg == "floor")
    figures["wait"] = {
        "order": list(order),
        **waits,
        "p50_vs_floor": ratio(waits["jobq"]["p50_ms"], waits["floor"]["p50_ms"]),
        "p99_vs_floor": ratio(waits["jobq"]["p99_ms"], waits["floor"]["p99_ms"]),
    }
    drain, single = figures["drain"], figures["single"]
    bench.say(
        f"  round {number + 1}, jobs/s: drain jobq {drain['jobq']:,.0f}, floor "
        f"{drain['floor']:,.0f}; single jobq {single['jobq']:,.0f}, floor "
        f"{single['floor']:,.0f}; enqueue-to-lease p50 jobq {waits['jobq']['p50_ms']:.2f}, "
        f"floor {waits['floor']['p50_ms']:.2f} ms"
    )
    return figures


def _empty(bench: Bench, leg: str, queued: int = 0) -> None:
    """A leg's table emptied, with `queued` jobs queued in it straight in SQL."""
    if leg == "jobq":
        bench.db(database.reset_jobs(bench.url))
        if queued:
            bench.db(database.queue_jobs(bench.url, QUEUE, queued))
    else:
        bench.db(database.prepare_bare(bench.url, queued))


def _done(bench: Bench, leg: str) -> int:
    if leg == "jobq":
        return succeeded(bench)
    return bench.db(database.bare_states(bench.url)).get(2, 0)


def _load(bench: Bench, load: str, leg: str, service: Service) -> dict[str, Any]:
    """One load through one service, every job of it checked done."""
    c = bench.config
    if load == "drain":
        jobs, done_at = c.floor_drain_jobs, "last_done"
        _empty(bench, leg, jobs)
        with bench.serving(service):
            run = run_drain(bench, QUEUE, c.drain_workers)
    else:
        jobs, done_at = c.floor_single_jobs, "t1"
        _empty(bench, leg)
        with bench.serving(service):
            run = run_single(bench, QUEUE, jobs)
    bench.check_done(
        f"floor round: {load} through {leg}", run.total("jobs"), jobs, _done(bench, leg)
    )
    return bench.load_figures(run, jobs, done_at)
