"""jobq's scenarios: the batch enqueue and drain, the drain of a limited queue, the
single-job path and enqueue-to-lease latency; each from an emptied jobs table, each
recording its figures in `bench.scenarios`. The loads they run are functions of their
own, which the framework floor's rounds (`bench.references`) run too."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from typing import Any

import httpx

from bench import database
from bench.base import Bench
from bench.generators import split
from bench.load import GeneratorRun
from bench.options import LEASE_BATCH
from bench.stats import latency_summary, ratio

LIMITED_MAX_RUNNING = 50
LIMITED_WORKERS = 8
PROBE_QUEUE = "bench-probe"
PROBE_CALLS = 50  # leases of one job, timed, after a few to warm up
PROBE_WARMUP_CALLS = 10
WARMUP_JOBS = 5000


# ---- the loads ---------------------------------------------------------------------


def run_enqueue(bench: Bench, queue: str, jobs: int, concurrency: int) -> GeneratorRun:
    """Batch enqueue: `jobs` jobs in batches, from `concurrency` concurrent producers."""
    size = bench.config.enqueue_batch
    batches = [(first, min(size, jobs - first)) for first in range(0, jobs, size)]
    generators = min(bench.config.generators, concurrency, len(batches))
    return bench.generate(
        "enqueue",
        [
            {"base_url": bench.base_url, "queue": queue, "batches": batches[g::generators],
             "concurrency": share}
            for g, share in enumerate(split(concurrency, generators))
        ],
    )  # fmt: skip


def run_drain(
    bench: Bench,
    queue: str,
    workers: int,
    *,
    hold_seconds: float = 0,
    wait_seconds: float = 0,
    ack_lease: bool = False,
) -> GeneratorRun:
    """The drain: workers lease 100 and ack each batch with one call, until `queue` is
    empty (`ack_lease`: the ack call leases the next batch)."""
    generators = min(bench.config.generators, workers)
    return bench.generate(
        "drain",
        [
            {"base_url": bench.base_url, "queue": queue, "workers": share,
             "max_jobs": LEASE_BATCH, "hold_seconds": hold_seconds,
             "wait_seconds": wait_seconds, "ack_lease": ack_lease}
            for share in split(workers, generators)
        ],
    )  # fmt: skip


def run_single(bench: Bench, queue: str, jobs: int) -> GeneratorRun:
    """The single-job path: concurrent loops of enqueue one, lease one, complete it."""
    c = bench.config
    generators = min(c.generators, c.single_concurrency)
    return bench.generate(
        "single",
        [
            {"base_url": bench.base_url, "queue": queue, "jobs": share, "concurrency": loops}
            for share, loops in zip(
                split(jobs, generators), split(c.single_concurrency, generators), strict=True
            )
        ],
    )


def run_wait_latency(bench: Bench, queue: str, *, floor: bool = False) -> dict[str, Any]:
    """Enqueue-to-lease with workers long-polling: its latencies and CPU per job."""
    c = bench.config
    run = bench.generate(
        "wait_latency",
        [
            {"base_url": bench.base_url, "queue": queue, "workers": c.latency_workers,
             "samples": c.latency_samples, "interval_s": c.latency_interval_ms / 1000,
             "settle_s": 1.0, "notify": floor}
        ],
    )  # fmt: skip
    latencies = run.merged("latency_ms")
    if len(latencies) != c.latency_samples:
        raise RuntimeError(f"latency: {len(latencies)} of {c.latency_samples} jobs arrived")
    return {
        **latency_summary(latencies),
        "enqueue_request": latency_summary(run.merged("enqueue_ms")),
        "cpu": bench.cpu(run, len(latencies)),
    }


def succeeded(bench: Bench) -> int:
    return bench.db(database.job_states(bench.url)).get("succeeded", 0)


# ---- the scenarios -----------------------------------------------------------------


def warm_up(bench: Bench) -> None:
    """An untimed round of each HTTP path: connections made, statements prepared."""
    bench.say("warm-up round (untimed)")
    bench.db(database.reset_jobs(bench.url))
    run_enqueue(bench, "warmup", WARMUP_JOBS, 4)
    run_drain(bench, "warmup", bench.config.drain_workers)
    run_single(bench, "warmup", 200)


def drain(bench: Bench) -> None:
    """Batch-enqueue `--jobs` jobs (timed: batch enqueue), then workers lease 100 at a
    time and ack each batch with one `/v1/acks` call (timed: drain)."""
    c = bench.config
    bench.db(database.reset_jobs(bench.url))
    bench.say(
        f"batch enqueue: {c.jobs:,} jobs, {c.enqueue_batch} per call, "
        f"{c.enqueue_concurrency} concurrent"
    )
    run = run_enqueue(bench, "bench-drain", c.jobs, c.enqueue_concurrency)
    states = bench.db(database.job_states(bench.url))
    if states != {"queued": c.jobs}:
        raise RuntimeError(f"batch enqueue: expected {c.jobs} queued jobs, found {states}")
    enqueued = bench.load_figures(
        run, c.jobs, "t1", batch=c.enqueue_batch, concurrency=c.enqueue_concurrency
    )
    enqueued["requests"] = run.total("requests")
    enqueued["request_latency"] = latency_summary(run.merged("request_ms"))
    bench.scenarios["batch_enqueue"] = enqueued
    bench.say(f"  {enqueued['jobs_per_s']:,.0f} jobs/s")

    bench.db(database.vacuum_analyze(bench.url))
    bench.say(f"drain: {c.drain_workers} workers, lease {LEASE_BATCH} + one /v1/acks call")
    run = run_drain(bench, "bench-drain", c.drain_workers)
    bench.check_done("drain", run.total("jobs"), c.jobs, succeeded(bench))
    drained = bench.load_figures(
        run, c.jobs, "last_done", workers=c.drain_workers, lease_batch=LEASE_BATCH
    )
    drained["calls"] = run.total("lease_calls") + run.total("ack_calls")
    drained["empty_leases"] = run.total("empty_leases")
    both = enqueued["seconds"] + drained["seconds"]
    drained["enqueue_and_drain_jobs_per_s"] = round(c.jobs / both, 1)
    bench.scenarios["drain"] = drained
    bench.say(f"  {drained['jobs_per_s']:,.0f} jobs/s")


def limited(bench: Bench) -> None:
    """The drain of a queue with `max_running`: workers asking for more than it allows,
    each holding its jobs a moment; how close to the limit's rate it runs, and how full
    the limit was kept (sampled while jobs were queued). Twice, back to back: workers
    that ack and lease in separate calls, then with complete-and-lease (the figures)."""
    separate = _limited_drain(bench, ack_lease=False)
    bench.scenarios["limited"] = {**_limited_drain(bench, ack_lease=True), "separate": separate}


def _one_lease_ms(bench: Bench) -> float:
    """The p50 of a call that leases one job (then completed, untimed) on an unlimited
    queue: no cycle of a limited queue's slot (lease, hold, ack) can take less than its
    hold and one such call, since a worker hears of its next job by one."""
    bench.db(database.queue_jobs(bench.url, PROBE_QUEUE, PROBE_CALLS + PROBE_WARMUP_CALLS))
    body = {"queues": [PROBE_QUEUE], "max_jobs": 1, "worker_id": "bench-probe"}
    timed: list[float] = []
    with httpx.Client(base_url=bench.base_url, timeout=30) as client:
        for n in range(PROBE_CALLS + PROBE_WARMUP_CALLS):
            sent = time.perf_counter()
            answer = client.post("/v1/leases", json=body)
            if n >= PROBE_WARMUP_CALLS:
                timed.append((time.perf_counter() - sent) * 1000)
            answer.raise_for_status()
            for lease in answer.json()["leases"]:
                client.post(f"/v1/leases/{lease['lease_id']}/complete", json={}).raise_for_status()
    return statistics.median(timed)


def _limited_drain(bench: Bench, *, ack_lease: bool) -> dict[str, Any]:
    c = bench.config
    jobs = max(LIMITED_MAX_RUNNING * 10, c.jobs // 5)
    queue = "bench-limited"
    call_ms = _one_lease_ms(bench)
    bench.db(database.reset_jobs(bench.url))
    bench.db(database.queue_jobs(bench.url, queue, jobs))
    httpx.put(
        f"{bench.base_url}/v1/queues/{queue}/settings",
        json={"max_running": LIMITED_MAX_RUNNING},
        timeout=30,
    ).raise_for_status()
    bench.db(database.vacuum_analyze(bench.url))
    how = "complete-and-lease" if ack_lease else "ack and lease in separate calls"
    bench.say(
        f"limited drain: max_running {LIMITED_MAX_RUNNING}, {LIMITED_WORKERS} workers "
        f"leasing {LEASE_BATCH}, each job held {c.limited_hold_ms:.0f} ms, {how}"
    )
    stop = threading.Event()
    samples: list[int] = []
    sampler = threading.Thread(
        target=lambda: samples.extend(
            asyncio.run(database.sample_running(bench.url, queue, 0.005, stop))
        )
    )
    sampler.start()
    try:
        run = run_drain(
            bench,
            queue,
            LIMITED_WORKERS,
            hold_seconds=c.limited_hold_ms / 1000,
            wait_seconds=1,
            ack_lease=ack_lease,
        )
    finally:
        stop.set()
        sampler.join()
    bench.check_done("limited drain", run.total("jobs"), jobs, succeeded(bench))
    figures = bench.load_figures(
        run, jobs, "last_done", max_running=LIMITED_MAX_RUNNING, workers=LIMITED_WORKERS
    )
    ideal = LIMITED_MAX_RUNNING / (c.limited_hold_ms / 1000)
    mean = statistics.fmean(samples) if samples else None
    s = {
        **figures,
        "hold_ms": c.limited_hold_ms,
        "complete_and_lease": ack_lease,
        "lease_calls": run.total("lease_calls"),
        "ack_calls": run.total("ack_calls"),
        "limit_jobs_per_s": round(ideal, 1),
        "of_limit_rate": round(figures["jobs_per_s"] / ideal, 3),
        # the most a slot's cycle allows: its hold, then one call (see _one_lease_ms)
        "one_lease_ms": round(call_ms, 2),
        "bound_of_limit_rate": round(c.limited_hold_ms / (c.limited_hold_ms + call_ms), 3),
        "running_mean": None if mean is None else round(mean, 1),
        "running_max": max(samples, default=None),
        "kept_full": None if mean is None else round(mean / LIMITED_MAX_RUNNING, 3),
        "samples": len(samples),
    }
    bench.say(
        f"  {s['jobs_per_s']:,.0f} jobs/s ({s['of_limit_rate']:.0%} of the limit's "
        f"{ideal:,.0f}; at most {s['bound_of_limit_rate']:.0%} with one lease call taking "
        f"{call_ms:.2f} ms); running {s['running_mean']} on average, at most "
        f"{s['running_max']} (limit {LIMITED_MAX_RUNNING})"
    )
    return s


def single(bench: Bench) -> None:
    """Enqueue, lease and complete one job per call, beside an idle replica."""
    c = bench.config
    bench.db(database.reset_jobs(bench.url))
    bench.say(f"single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} concurrent loops")
    with bench.idle_replica() as replica_seconds:
        run = run_single(bench, "bench-single", c.single_jobs)
        idle_seconds = replica_seconds()
    bench.check_done("single", run.total("jobs"), c.single_jobs, succeeded(bench))
    figures = bench.load_figures(run, c.single_jobs, "t1", concurrency=c.single_concurrency)
    # a second `jobq serve` on the database, serving nothing meanwhile
    idle_us = round(idle_seconds / c.single_jobs * 1e6, 2)
    bench.scenarios["single"] = {
        **figures,
        "calls": run.total("calls"),  # every call, enqueues and empty leases included
        "empty_leases": run.total("empty_leases"),
        "idle_replica_us_per_job": idle_us,
        "idle_replica_percent": ratio(idle_us * 100, figures["cpu"]["service_us_per_job"]),
    }
    bench.say(f"  {figures['jobs_per_s']:,.0f} jobs/s")


def latency(bench: Bench) -> None:
    """Enqueue-to-lease latency: jobs enqueued one at a time, workers already waiting."""
    c = bench.config
    bench.db(database.reset_jobs(bench.url))
    bench.say(
        f"enqueue-to-lease latency: {c.latency_workers} workers waiting (wait_seconds 20), "
        f"{c.latency_samples} jobs one at a time every ~{c.latency_interval_ms:g} ms"
    )
    s = run_wait_latency(bench, "bench-wait")
    bench.scenarios["enqueue_to_lease"] = {
        "waiting_workers": c.latency_workers,
        "interval_ms": c.latency_interval_ms,
        **s,
    }
    bench.say(f"  p50 {s['p50_ms']:.2f} ms, p95 {s['p95_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms")
