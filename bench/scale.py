"""The scale scenario (`--scale ROWS`): what an operator reads, and the hot calls, on a
nearly empty table and on ROWS rows of history (`bench.history`), in one run.

Each call is made `SCALE_CALLS` times one after another (after `SCALE_WARMUP_CALLS`
untimed ones) against a `jobq serve` of the scenario's own whose `/metrics` reads SQL
on every scrape (`JOBQ_METRICS_REFRESH_SECONDS=0`), so the gauges' read is timed too.
"Nearly empty" is the same shape of history at `EMPTY_ROWS` rows: every call then reads
the same queues.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx

from bench import database
from bench.base import Bench
from bench.history import fill_history, wait_folded
from bench.service import Service

EMPTY_ROWS = 1_000
SCALE_CALLS = 30
SCALE_WARMUP_CALLS = 3
FOLD_TIMEOUT_SECONDS = 1800.0
SETTLED_TABLES = ("jobq.job_stat_deltas", "jobq.queue_minutes", "jobq.queue_recent")
HOT_QUEUE = "scale-hot"
READS = {
    "queue list": "/v1/queues",
    "one queue": "/v1/queues/q7",
    "series, hour": "/v1/queues/q7/series?minutes=60",
    "series, week": "/v1/queues/q7/series?minutes=10080",
    "failed groups": "/v1/queues/q7/failed/groups",
    "job list": "/v1/jobs?queue=q7&state=failed&limit=50",
    "metrics": "/metrics",
}
CLEAR_STATISTICS = (
    "TRUNCATE jobq.jobs, jobq.queue_minutes, jobq.queue_recent, jobq.job_stat_deltas"
    " RESTART IDENTITY"
)


def _timed(call: Callable[[], httpx.Response]) -> dict[str, float]:
    """p50 and p95 (ms) of SCALE_CALLS calls, each checked."""
    for _ in range(SCALE_WARMUP_CALLS):
        call().raise_for_status()
    times = []
    for _ in range(SCALE_CALLS):
        started = time.perf_counter()
        call().raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
    }


def _measure(base_url: str) -> dict[str, dict[str, float]]:
    """Each operator read, then enqueue one job and lease one, timed."""
    with httpx.Client(base_url=base_url, timeout=120) as http:
        figures = {name: _timed(partial(http.get, path)) for name, path in READS.items()}
        figures["enqueue"] = _timed(
            lambda: http.post(f"/v1/queues/{HOT_QUEUE}/jobs", json={"type": "t", "payload": {}})
        )
        # as many leases as enqueues: each takes one job
        figures["lease"] = _timed(
            lambda: http.post(
                "/v1/leases", json={"queues": [HOT_QUEUE], "max_jobs": 1, "worker_id": "scale"}
            )
        )
    return figures


def _fill(bench: Bench, rows: int) -> float:
    async def clear() -> None:
        async with database.connect(bench.url) as conn:
            await conn.execute(CLEAR_STATISTICS)

    bench.db(clear())
    seconds = bench.db(fill_history(bench.url, rows))
    if not bench.db(wait_folded(bench.url, FOLD_TIMEOUT_SECONDS)):
        raise RuntimeError("scale: the statistics deltas were not folded in time")
    # the fill's recount wrote its deltas at once, and the fold left their pages empty:
    # what autovacuum does next, so that the reads are timed on a settled database
    for table in SETTLED_TABLES:
        bench.db(database.vacuum_analyze(bench.url, table))
    return seconds


def scale(bench: Bench) -> None:
    """The operator reads and the hot calls at EMPTY_ROWS and at `--scale` rows."""
    rows = bench.config.scale_rows
    service = Service(
        bench.url,
        workers=1,
        log_path=bench.log_dir / "scale-service.log",
        extra_env={**bench.config.service_env, "JOBQ_METRICS_REFRESH_SECONDS": "0"},
    )
    results: dict[str, Any] = {"rows": rows, "empty_rows": EMPTY_ROWS, "calls": SCALE_CALLS}
    with service:
        bench.say(f"scale: {EMPTY_ROWS:,} rows of history, then each call {SCALE_CALLS} times")
        _fill(bench, EMPTY_ROWS)
        empty = _measure(service.url)
        bench.say(f"scale: filling {rows:,} rows of history (SQL), statistics folded")
        results["fill_seconds"] = round(_fill(bench, rows), 1)
        full = _measure(service.url)
    calls: dict[str, dict[str, Any]] = {}
    for name in empty:
        e, f = empty[name], full[name]
        calls[name] = {
            "empty": e,
            "full": f,
            "p50_vs_empty": round(f["p50_ms"] / e["p50_ms"], 2),
        }
    reads = [calls[name] for name in READS]
    hot = [calls[name] for name in ("enqueue", "lease")]
    results["calls_by_name"] = calls
    results["worst_read_vs_empty"] = max(float(c["p50_vs_empty"]) for c in reads)
    results["worst_read_p50_ms"] = max(float(c["full"]["p50_ms"]) for c in reads)
    results["worst_hot_vs_empty"] = max(float(c["p50_vs_empty"]) for c in hot)
    bench.scenarios["scale"] = results
    bench.say(
        f"  reads at most {results['worst_read_p50_ms']} ms p50, "
        f"{results['worst_read_vs_empty']}x empty; hot calls {results['worst_hot_vs_empty']}x"
    )
