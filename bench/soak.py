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
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import psutil
from rich.console import Console
from rich.table import Table

from bench import database
from bench.base import BenchBase
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


BOUNDS = (
    Bound("table_mb", "jobs table", "MB", 1.2),
    Bound("index_mb", "its indexes", "MB", 1.2),
    Bound("dead_tuples", "dead tuples", "", 1.5),
    Bound("latency_p50_ms", "enqueue-to-lease p50", "ms", 1.2),
    Bound("latency_p99_ms", "enqueue-to-lease p99", "ms", 1.2),
    Bound("rss_mb", "service memory (RSS)", "MB", 1.1),
)


def _rss_mb(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in processes) / 2**20
    except psutil.Error:
        return 0.0


async def _sizes(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(database.dsn(url))
    try:
        row = await conn.fetchrow(SIZES)
    finally:
        await conn.close()
    assert row is not None
    return dict(row)


def interval_for(seconds: float) -> float:
    """Every 7 s, or often enough for ten samples in a short soak."""
    return min(MAX_INTERVAL_SECONDS, seconds / SAMPLES_AT_LEAST)


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The early and late means after the warm-up, their ratio, and whether it is flat."""
    settled = samples[int(len(samples) * WARMUP_FRACTION) :]
    third = max(1, len(settled) // 3)
    early, late = settled[:third], settled[-third:]
    figures: dict[str, Any] = {}
    for bound in BOUNDS:
        before = [s[bound.key] for s in early if s.get(bound.key) is not None]
        after = [s[bound.key] for s in late if s.get(bound.key) is not None]
        if not before or not after:
            figures[bound.key] = {"what": bound.what, "flat": None}
            continue
        first, last = statistics.fmean(before), statistics.fmean(after)
        change = last / first if first else (1.0 if not last else float("inf"))
        figures[bound.key] = {
            "what": bound.what,
            "unit": bound.unit,
            "early": round(first, 2),
            "late": round(last, 2),
            "late_vs_early": round(change, 3),
            "at_most": bound.most,
            "flat": change <= bound.most,
        }
    return figures


class Soak(BenchBase):
    """The soak scenario, its sampler and its summary."""

    def soak(self) -> None:
        c = self.config
        assert self.log_dir is not None
        seconds = c.soak_minutes * 60
        interval = interval_for(seconds)
        env = {
            "JOBQ_RETAIN_SUCCEEDED_SECONDS": str(SOAK_RETAIN_SECONDS),
            "JOBQ_RETAIN_FAILED_SECONDS": str(SOAK_RETAIN_SECONDS),
            "JOBQ_PRUNE_INTERVAL_SECONDS": str(SOAK_PRUNE_SECONDS),
            **c.service_env,
        }
        service = Service(
            self.url, workers=c.workers, log_path=self.log_dir / "soak.log", extra_env=env
        )
        self.db(database.reset_jobs(self.url))
        self.say(
            f"soak: {c.soak_minutes:g} min, {c.soak_rate:g} jobs/s, {c.soak_workers} workers "
            f"long-polling, 1 in {c.soak_fail_every} failing once, retention "
            f"{SOAK_RETAIN_SECONDS} s; a sample every {interval:g} s"
        )
        samples: list[dict[str, Any]] = []
        stop = threading.Event()

        def sample() -> None:
            started = time.monotonic()
            while not stop.wait(interval):
                row = asyncio.run(_sizes(self.url))
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
                self.say(
                    f"  {last['t_s']:>6.0f} s: table {last['table_mb']:.1f} MB, indexes "
                    f"{last['index_mb']:.1f} MB, dead {last['dead_tuples']:,}, "
                    f"RSS {last['rss_mb']:.0f} MB"
                )

        with service, self.serving(service):
            sampler = threading.Thread(target=sample, name="soak-sampler", daemon=True)
            sampler.start()
            try:
                run = self.generate(
                    "soak",
                    [
                        {
                            "base_url": service.url,
                            "queue": SOAK_QUEUE,
                            "rate": c.soak_rate,
                            "seconds": seconds,
                            "workers": c.soak_workers,
                            "max_jobs": 10,
                            "fail_every": c.soak_fail_every,
                        }
                    ],
                )
            finally:
                stop.set()
                sampler.join()
        latencies = [(float(t), float(ms)) for r in run.results for t, ms in r["samples"]]
        self._latency_per_interval(samples, latencies)
        steady_until = min(float(r["steady_until"]) for r in run.results)
        steady = [s for s in samples if s["wall"] <= steady_until]
        enqueued, leased = run.total("enqueued"), run.total("leased")
        self.scenarios["soak"] = {
            "minutes": c.soak_minutes,
            "rate_per_s": c.soak_rate,
            "workers": c.soak_workers,
            "retain_seconds": SOAK_RETAIN_SECONDS,
            "interval_s": interval,
            "enqueued": enqueued,
            "leased": leased,
            "failed_once": run.total("failed"),
            "late_enqueues": run.total("late_enqueues"),
            "cpu": self.cpu(run, max(enqueued, 1)),
            "steady_until": steady_until,
            "steady_samples": len(steady),
            "summary": summarize(steady),
            "samples": samples,
        }
        flat = [f["flat"] for f in self.scenarios["soak"]["summary"].values()]
        late = self.scenarios["soak"]["late_enqueues"]
        self.say(
            f"  {enqueued:,} enqueued ({late:,} over a second late), {leased:,} leased; "
            f"flat {flat.count(True)}/{len(flat)}"
        )

    @staticmethod
    def _latency_per_interval(
        samples: list[dict[str, Any]], latencies: list[tuple[float, float]]
    ) -> None:
        """Each sample gets the p50 and p99 of the jobs leased since the one before."""
        previous = 0.0
        for s in samples:
            window = [ms for arrived, ms in latencies if previous < arrived <= s["wall"]]
            previous = s["wall"]
            s["leased"] = len(window)
            s["latency_p50_ms"] = round(percentile(window, 50), 2) if window else None
            s["latency_p99_ms"] = round(percentile(window, 99), 2) if window else None


SHOWN_SAMPLES = 20


def render_soak(soak: dict[str, Any], console: Console) -> None:
    """Samples over time (at most 20, evenly spread) and the early/late comparison."""
    samples = soak["samples"]
    step = max(1, -(-len(samples) // SHOWN_SAMPLES))
    table = Table(
        title=f"Soak: {soak['minutes']:g} min at {soak['rate_per_s']:g} jobs/s, "
        f"retention {soak['retain_seconds']} s ({soak['enqueued']:,} enqueued)"
    )
    for column in (
        "t (s)", "table MB", "index MB", "live", "dead", "vacuums",
        "leased", "p50 ms", "p99 ms", "RSS MB",
    ):  # fmt: skip
        table.add_column(column, justify="right")
    for s in samples[::step]:
        table.add_row(
            f"{s['t_s']:.0f}",
            f"{s['table_mb']:.1f}",
            f"{s['index_mb']:.1f}",
            f"{s['live_tuples']:,}",
            f"{s['dead_tuples']:,}",
            f"{s['vacuums']}",
            f"{s.get('leased', 0):,}",
            "-" if s.get("latency_p50_ms") is None else f"{s['latency_p50_ms']:.2f}",
            "-" if s.get("latency_p99_ms") is None else f"{s['latency_p99_ms']:.2f}",
            f"{s['rss_mb']:.0f}",
        )
    console.print(table)
    summary = Table(title="Soak after warm-up: early third against late third")
    for column in ("figure", "early", "late", "late / early", "at most", ""):
        summary.add_column(column, justify="left" if column == "figure" else "right")
    for figure in soak["summary"].values():
        if figure["flat"] is None:
            summary.add_row(figure["what"], "-", "-", "-", "-", "[dim]not measured[/]")
            continue
        unit = f" {figure['unit']}" if figure["unit"] else ""
        summary.add_row(
            figure["what"],
            f"{figure['early']:,.2f}{unit}",
            f"{figure['late']:,.2f}{unit}",
            f"{figure['late_vs_early']:.3f}",
            f"{figure['at_most']:g}",
            "[green]flat[/]" if figure["flat"] else "[red]GROWS[/]",
        )
    console.print(summary)
