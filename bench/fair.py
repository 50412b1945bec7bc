"""The `fair` scenario (issue 49): a fair queue's drain against a fifo queue's, its lease
cost with 10,000 keys against 10, and the steady tenants' enqueue-to-lease while one
tenant floods the queue. Every comparison is within the run, back to back."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from bench import database
from bench.base import Bench
from bench.scenarios import run_drain, succeeded
from bench.stats import latency_summary, ratio

FEW_KEYS = 10
MANY_KEYS = 10_000
STEADY_KEYS = [chr(c) for c in range(ord("B"), ord("K") + 1)]  # tenants B to K
STEADY_JOBS_PER_S = 100  # B to K in turn, one job per call
FLOOD_KEY = "A"


def _make_fair(bench: Bench, queue: str) -> None:
    httpx.put(
        f"{bench.base_url}/v1/queues/{queue}/settings", json={"ordering": "fair"}, timeout=60
    ).raise_for_status()


def _drain(bench: Bench, queue: str, jobs: int, keys: list[str], *, fair: bool) -> dict[str, Any]:
    """Queue `jobs` jobs over `keys` in SQL, then drain them as the drain scenario does."""
    bench.db(database.queue_keyed_jobs(bench.url, queue, jobs, keys))
    if fair:
        _make_fair(bench, queue)
    run = run_drain(bench, queue, bench.config.drain_workers)
    bench.check_done(f"fair: drain of {queue}", run.total("jobs"), jobs, succeeded(bench))
    figures = bench.load_figures(run, jobs, "last_done", keys=len(keys), fair=fair)
    figures["lease_calls"] = run.total("lease_calls")
    return figures


def _steady(bench: Bench, seconds: float, stop: threading.Event) -> int:
    """Tenants B to K enqueue one job at a time, STEADY_JOBS_PER_S in all, for `seconds`."""
    sent = 0
    started = time.monotonic()
    with httpx.Client(base_url=bench.base_url, timeout=30) as http:
        while not stop.is_set() and time.monotonic() - started < seconds:
            key = STEADY_KEYS[sent % len(STEADY_KEYS)]
            http.post(
                "/v1/queues/bench-tenants/jobs", json={"type": "steady", "fairness_key": key}
            ).raise_for_status()
            sent += 1
            time.sleep(max(0.0, started + sent / STEADY_JOBS_PER_S - time.monotonic()))
    return sent


def _steady_latency(bench: Bench, flood: int) -> dict[str, Any]:
    """B to K's enqueue-to-lease while workers drain the queue, after `flood` jobs of A."""
    queue = "bench-tenants"
    bench.db(database.queue_keyed_jobs(bench.url, queue, flood, [FLOOD_KEY]))
    _make_fair(bench, queue)
    stop = threading.Event()
    sent: list[int] = []
    producer = threading.Thread(
        target=lambda: sent.append(_steady(bench, bench.config.fair_steady_seconds, stop))
    )
    producer.start()
    try:
        run = run_drain(bench, queue, bench.config.drain_workers, wait_seconds=1)
    finally:
        stop.set()
        producer.join()
    bench.check_done("fair: tenants", run.total("jobs"), flood + sent[0], succeeded(bench))
    waits = bench.db(database.lease_waits_ms(bench.url, queue, STEADY_KEYS))
    return {"flood_jobs": flood, "steady_jobs": sent[0], **latency_summary(waits)}


def fair(bench: Bench) -> None:
    """Fair against fifo: the drain (10 keys), the drain with 10,000 keys, and tenants B
    to K's enqueue-to-lease with and without tenant A's flood queued ahead of them."""
    c = bench.config
    jobs = max(c.jobs // 2, MANY_KEYS)
    few = [f"k{i}" for i in range(FEW_KEYS)]
    many = [f"k{i}" for i in range(MANY_KEYS)]
    bench.say(
        f"fair: drain of {jobs:,} jobs, fifo, then fair over {FEW_KEYS} and {MANY_KEYS:,} keys"
    )
    fifo = _drain(bench, "bench-fifo", jobs, few, fair=False)
    fair_few = _drain(bench, "bench-fair-few", jobs, few, fair=True)
    fair_many = _drain(bench, "bench-fair-many", jobs, many, fair=True)
    bench.say(
        f"  fifo {fifo['jobs_per_s']:,.0f} jobs/s; fair {fair_few['jobs_per_s']:,.0f} "
        f"({FEW_KEYS} keys), {fair_many['jobs_per_s']:,.0f} ({MANY_KEYS:,} keys)"
    )
    bench.say(
        f"fair: tenants B-K enqueue {STEADY_JOBS_PER_S}/s for {c.fair_steady_seconds:g} s, "
        f"without and with {c.fair_flood_jobs:,} jobs of A queued ahead"
    )
    quiet = _steady_latency(bench, 0)
    flooded = _steady_latency(bench, c.fair_flood_jobs)
    bench.say(f"  B-K p99 {quiet['p99_ms']:.1f} ms quiet, {flooded['p99_ms']:.1f} ms flooded")
    bench.scenarios["fair"] = {
        "drain_fifo": fifo,
        "drain_fair": fair_few,
        "drain_fair_many_keys": fair_many,
        "drain_vs_fifo": ratio(fair_few["jobs_per_s"], fifo["jobs_per_s"]),
        # the cost of a job's lease with many keys against few: the drains' time per job
        "lease_cost_many_vs_few_keys": ratio(fair_few["jobs_per_s"], fair_many["jobs_per_s"]),
        "steady_quiet": quiet,
        "steady_flooded": flooded,
        "flooded_p99_vs_quiet": ratio(flooded["p99_ms"], quiet["p99_ms"]),
    }
