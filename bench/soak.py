"""The soak (`--soak MINUTES`): a steady load for a long time, and whether jobq stays flat.

A `jobq serve` of its own, with retention on (finished jobs deleted after
`SOAK_RETAIN_SECONDS`, pruned every `SOAK_PRUNE_SECONDS`), takes a fixed rate of enqueues
from `bench.soak_load` while its workers long-poll, lease, complete and sometimes fail.
Every interval the benchmark samples the jobs table's and its indexes' sizes, live and
dead tuples, the enqueue-to-lease latency of the jobs leased in that interval (p50,
p99) and the service's memory (RSS of all its processes).

After a warm-up (the first fifth of the run), the early third of the samples is compared
with the late third: a figure is flat when the late mean is within its bound of the
early mean (sizes and latency 20 %, memory 10 %, dead tuples, which autovacuum makes a
saw-tooth, 50 %). Only the samples of the load's steady phase count: not those taken
while its workers stop, nor after (the table then holds what was sent last, unleased).

This machine's speed moves by tens of percent within minutes, and the latency with it.
So the framework floor (`bench.floor`, long-polling over LISTEN, no retention) takes the
same kind of load beside jobq's, in one process at `--soak-reference-rate` (a fraction
of jobq's rate, not to crowd it), and each sample also holds the floor's latency over
the same seconds: jobq's latency against the floor's, late against early, is jobq's
own drift with the machine's taken out.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import psutil

from bench import database
from bench.base import Bench
from bench.service import Service
from bench.stats import percentile

SOAK_RETAIN_SECONDS = 60
SOAK_PRUNE_SECONDS = 10
SOAK_QUEUE = "bench-soak"
WARMUP_FRACTION = 0.2
# Not a divisor or multiple of the 10-s prune or the 30-s vacuum: samples fall at every
# phase of the dead tuples' saw-tooth. (Every 30 s, the samples drifted slowly along
# the vacuum's cycle, and the mean of a third followed the drift, not the table.)
MAX_INTERVAL_SECONDS = 7.0
SAMPLES_AT_LEAST = 10

SIZES = """
SELECT pg_table_size('jobq.jobs') AS table_bytes,
       pg_indexes_size('jobq.jobs') AS index_bytes,
       n_live_tup AS live_tuples, n_dead_tup AS dead_tuples,
       coalesce(autovacuum_count, 0) + coalesce(vacuum_count, 0) AS vacuums
FROM pg_stat_user_tables WHERE relid = 'jobq.jobs'::regclass
"""


@dataclass(frozen=True)
class Bound:
    key: str
    what: str
    unit: str
    most: float  # late mean / early mean at most this
    against: str = ""  # for jobq's figure / the floor's: the key of jobq's figure


BOUNDS = (
    Bound("table_mb", "jobs table", "MB", 1.2),
    Bound("index_mb", "its indexes", "MB", 1.2),
    Bound("dead_tuples", "dead tuples", "", 1.5),
    Bound("latency_p50_ms", "enqueue-to-lease p50", "ms", 1.2),
    Bound("latency_p99_ms", "enqueue-to-lease p99", "ms", 1.2),
    Bound("rss_mb", "service memory (RSS)", "MB", 1.1),
)
FLOOR = "floor_"  # the reference floor's figures: jobq's keys with this prefix
REFERENCE_BOUNDS = (  # the machine's drift: reported, not judged as jobq's
    Bound(f"{FLOOR}latency_p50_ms", "the floor's enqueue-to-lease p50", "ms", 1.2),
    Bound(f"{FLOOR}latency_p99_ms", "the floor's enqueue-to-lease p99", "ms", 1.2),
)
RELATIVE_BOUNDS = (  # jobq's latency / the floor's over the same seconds
    Bound("latency_p50_vs_floor", "enqueue-to-lease p50 / the floor's", "x", 1.2,
          against="latency_p50_ms"),
    Bound("latency_p99_vs_floor", "enqueue-to-lease p99 / the floor's", "x", 1.2,
          against="latency_p99_ms"),
)  # fmt: skip
JUDGED = (*BOUNDS, *RELATIVE_BOUNDS)


def _rss_mb(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in processes) / 2**20
    except psutil.Error:
        return 0.0


async def _sizes(url: str) -> dict[str, Any]:
    async with database.connect(url) as conn:
        row = await conn.fetchrow(SIZES)
    assert row is not None
    return dict(row)


def interval_for(seconds: float) -> float:
    """Every 7 s, or often enough for ten samples in a short soak."""
    return min(MAX_INTERVAL_SECONDS, seconds / SAMPLES_AT_LEAST)


def _figure(bound: Bound, first: float, last: float) -> dict[str, Any]:
    change = last / first if first else (1.0 if not last else float("inf"))
    digits = 3 if bound.unit == "x" else 2
    return {
        "what": bound.what,
        "unit": bound.unit,
        "early": round(first, digits),
        "late": round(last, digits),
        "late_vs_early": round(change, 3),
        "at_most": bound.most,
        "flat": change <= bound.most,
    }


def summarize(samples: list[dict[str, Any]], *, reference: bool = False) -> dict[str, Any]:
    """The early and late means after the warm-up, their ratio, and whether it is flat;
    with the floor's `reference` load, its latency and jobq's against it too."""
    settled = samples[int(len(samples) * WARMUP_FRACTION) :]
    third = max(1, len(settled) // 3)
    early, late = settled[:third], settled[-third:]
    means: dict[str, tuple[float, float]] = {}
    figures: dict[str, Any] = {}
    for bound in (*BOUNDS, *(REFERENCE_BOUNDS if reference else ())):
        before = [s[bound.key] for s in early if s.get(bound.key) is not None]
        after = [s[bound.key] for s in late if s.get(bound.key) is not None]
        if not before or not after:
            figures[bound.key] = {"what": bound.what, "flat": None}
            continue
        means[bound.key] = statistics.fmean(before), statistics.fmean(after)
        figures[bound.key] = _figure(bound, *means[bound.key])
    if reference:
        for bound in RELATIVE_BOUNDS:
            jobq, floor = bound.against, f"{FLOOR}{bound.against}"
            if jobq not in means or floor not in means or not all(means[floor]):
                figures[bound.key] = {"what": bound.what, "flat": None}
                continue
            (jobq_early, jobq_late), (floor_early, floor_late) = means[jobq], means[floor]
            figures[bound.key] = _figure(bound, jobq_early / floor_early, jobq_late / floor_late)
    return figures


def soak(bench: Bench) -> None:
    """A steady load with retention on for `--soak` minutes, sampled as it runs."""
    c = bench.config
    seconds = c.soak_minutes * 60
    interval = interval_for(seconds)
    env = {
        "JOBQ_RETAIN_SUCCEEDED_SECONDS": str(SOAK_RETAIN_SECONDS),
        "JOBQ_RETAIN_FAILED_SECONDS": str(SOAK_RETAIN_SECONDS),
        "JOBQ_PRUNE_INTERVAL_SECONDS": str(SOAK_PRUNE_SECONDS),
        **c.service_env,
    }
    service = Service(
        bench.url, workers=c.workers, log_path=bench.log_dir / "soak.log", extra_env=env
    )
    bench.db(database.reset_jobs(bench.url))
    reference = c.soak_reference_rate > 0
    bench.say(
        f"soak: {c.soak_minutes:g} min, {c.soak_rate:g} jobs/s, {c.soak_workers} workers "
        f"long-polling, 1 in {c.soak_fail_every} failing once, retention "
        f"{SOAK_RETAIN_SECONDS} s; a sample every {interval:g} s"
        + (
            f"; beside it the framework floor at {c.soak_reference_rate:g} jobs/s"
            if reference
            else ""
        )
    )
    load = {
        "queue": SOAK_QUEUE,
        "seconds": seconds,
        "workers": c.soak_workers,
        "max_jobs": 10,
    }
    loads = [
        {**load, "base_url": service.url, "rate": c.soak_rate, "fail_every": c.soak_fail_every}
    ]
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample() -> None:
        started = time.monotonic()
        while not stop.wait(interval):
            row = asyncio.run(_sizes(bench.url))
            samples.append(
                {
                    "t_s": round(time.monotonic() - started, 1),
                    "wall": time.time(),
                    "table_mb": round(row["table_bytes"] / 2**20, 2),
                    "index_mb": round(row["index_bytes"] / 2**20, 2),
                    "live_tuples": row["live_tuples"],
                    "dead_tuples": row["dead_tuples"],
                    "vacuums": row["vacuums"],
                    "rss_mb": round(_rss_mb(service.pid), 1),
                }
            )
            last = samples[-1]
            bench.say(
                f"  {last['t_s']:>6.0f} s: table {last['table_mb']:.1f} MB, indexes "
                f"{last['index_mb']:.1f} MB, dead {last['dead_tuples']:,}, "
                f"RSS {last['rss_mb']:.0f} MB"
            )

    with ExitStack() as stack:
        stack.enter_context(service)
        stack.enter_context(bench.serving(service))
        if reference:
            bench.db(database.prepare_bare(bench.url, 0))
            floor = stack.enter_context(
                Service(
                    bench.url, workers=1, log_path=bench.log_dir / "soak-floor.log",
                    app="floor",
                )
            )  # fmt: skip
            loads.append(
                {
                    **load,
                    "base_url": floor.url,
                    "rate": c.soak_reference_rate,
                    "fail_every": 0,  # the floor has no retries
                    "notify": True,
                }
            )
        sampler = threading.Thread(target=sample, name="soak-sampler", daemon=True)
        sampler.start()
        try:
            run = bench.generate("soak", loads)
        finally:
            stop.set()
            sampler.join()
    jobq = run.results[0]  # the floor's, if any, is the second
    _latency_per_interval(samples, jobq["samples"])
    if reference:
        _latency_per_interval(samples, run.results[1]["samples"], prefix=FLOOR)
    steady_until = min(float(r["steady_until"]) for r in run.results)
    steady = [s for s in samples if s["wall"] <= steady_until]
    enqueued, leased = int(jobq["enqueued"]), int(jobq["leased"])
    bench.scenarios["soak"] = {
        "minutes": c.soak_minutes,
        "rate_per_s": c.soak_rate,
        "workers": c.soak_workers,
        "retain_seconds": SOAK_RETAIN_SECONDS,
        "interval_s": interval,
        "enqueued": enqueued,
        "leased": leased,
        "failed_once": int(jobq["failed"]),
        "late_enqueues": int(jobq["late_enqueues"]),
        # the service's CPU is jobq's; PostgreSQL's and the load's include the floor's
        "cpu": bench.cpu(run, max(enqueued, 1)),
        "reference": (
            {
                "rate_per_s": c.soak_reference_rate,
                "enqueued": int(run.results[1]["enqueued"]),
                "leased": int(run.results[1]["leased"]),
                "late_enqueues": int(run.results[1]["late_enqueues"]),
            }
            if reference
            else None
        ),
        "steady_until": steady_until,
        "steady_samples": len(steady),
        "summary": summarize(steady, reference=reference),
        "samples": samples,
    }
    summary = bench.scenarios["soak"]["summary"]
    flat = [summary[bound.key]["flat"] for bound in JUDGED if bound.key in summary]
    late = bench.scenarios["soak"]["late_enqueues"]
    bench.say(
        f"  {enqueued:,} enqueued ({late:,} over a second late), {leased:,} leased; "
        f"flat {flat.count(True)}/{len(flat)}"
    )


def _latency_per_interval(
    samples: list[dict[str, Any]], latencies: list[tuple[float, float]], prefix: str = ""
) -> None:
    """Each sample gets the p50 and p99 of the jobs leased since the one before
    (`latencies`: [arrived, ms] each); the floor's figures named with `prefix`."""
    previous = 0.0
    for s in samples:
        window = [ms for arrived, ms in latencies if previous < arrived <= s["wall"]]
        previous = s["wall"]
        s[f"{prefix}leased"] = len(window)
        for q in (50, 99):
            s[f"{prefix}latency_p{q}_ms"] = round(percentile(window, q), 2) if window else None
