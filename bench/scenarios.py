"""The scenarios: the bare SKIP LOCKED loop, the drain, the drain of a limited queue, the
single-job path, latency, the lease at several table sizes, and the framework floor."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench import database
from bench.base import BenchBase
from bench.floor import ANSWER_VARIABLE
from bench.floor_whole import WIDE_TABLE
from bench.generators import split
from bench.load import GeneratorRun
from bench.options import LEASE_BATCH
from bench.service import Service
from bench.stats import latency_summary, ratio

DASHBOARD_SAMPLES = 20
LIMITED_MAX_RUNNING = 50
LIMITED_WORKERS = 8


class Scenarios(BenchBase):
    """The scenarios, each from an emptied jobs table; each records its figures."""

    def bare(self) -> None:
        c = self.config
        results: dict[str, Any] = {}
        batch, single = c.bare_jobs, c.bare_single_jobs
        for key, mode, rows, size, label in (
            ("batch", "claim", batch, LEASE_BATCH, f"claim {LEASE_BATCH}"),
            ("batch_with_finish", "claim_finish", batch, LEASE_BATCH, "claim 100 + finish"),
            ("single", "claim", single, 1, "claim 1"),
            ("single_with_finish", "claim_finish", single, 1, "claim 1 + finish"),
            ("single_with_insert", "insert", single, 1, "insert + claim 1 + finish"),
            ("jobq_sql_batch", "jobq_sql", batch, LEASE_BATCH, "jobq's LEASE 100 + FINISH"),
            ("wide_batch", "wide_sql", batch, LEASE_BATCH, "claim 100 + finish, jobq's row"),
        ):
            if mode == "jobq_sql":
                self.db(database.queue_jobs(self.url, "bench-sql", rows))
            elif mode == "wide_sql":
                self.db(database.prepare_wide(self.url, "bench-sql", rows))
            else:
                self.db(database.prepare_bare(self.url, 0 if mode == "insert" else rows))
            self.say(f"bare SKIP LOCKED loop: {label}, {c.bare_connections} connections")
            run = self.generate(
                "bare",
                [
                    {
                        "dsn": database.dsn(self.url),
                        "mode": mode,
                        "batch": size,
                        "connections": c.bare_connections,
                        "jobs": rows,
                        "queue": "bench-sql",
                    }
                ],
            )
            jobs = run.total("jobs")
            if mode == "jobq_sql":
                done = self.db(database.job_states(self.url)).get("succeeded", 0)
            elif mode == "wide_sql":
                done = self._wide_done()
            else:
                states = self.db(database.bare_states(self.url))
                done = states.get(1 if mode == "claim" else 2, 0)
            if jobs != rows or done != rows:
                raise RuntimeError(f"bare {key}: {jobs} claimed, {done} done, {rows} expected")
            seconds = max(r["last_done"] for r in run.results) - run.started
            results[key] = {
                "what": label,
                "batch": batch,
                "connections": c.bare_connections,
                "jobs": jobs,
                "statements": run.total("statements"),
                "seconds": round(seconds, 3),
                "jobs_per_s": round(jobs / seconds, 1),
                "cpu": self.cpu(run, jobs),
            }
            self.say(f"  {results[key]['jobs_per_s']:,.0f} jobs/s")
        self.scenarios["bare"] = results

    def drain(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        queue = "bench-drain"
        self.say(
            f"batch enqueue: {c.jobs:,} jobs, {c.enqueue_batch} per call, "
            f"{c.enqueue_concurrency} concurrent"
        )
        with self.profiled("enqueue"):
            run = self.run_enqueue(queue)
        states = self.db(database.job_states(self.url))
        if states != {"queued": c.jobs}:
            raise RuntimeError(f"batch enqueue: expected {c.jobs} queued jobs, found {states}")
        self.scenarios["batch_enqueue"] = self.enqueue_figures(run)
        self.say(f"  {self.scenarios['batch_enqueue']['jobs_per_s']:,.0f} jobs/s")

        self.db(database.vacuum_analyze(self.url))
        self.say(f"drain: {c.drain_workers} workers, lease {LEASE_BATCH} + one /v1/acks call")
        with self.profiled("drain"):
            run = self.run_drain(queue)
        states = self.db(database.job_states(self.url))
        if run.total("jobs") != c.jobs or states != {"succeeded": c.jobs}:
            raise RuntimeError(f"drain: acked {run.total('jobs')} of {c.jobs}; table: {states}")
        seconds = max(r["last_done"] for r in run.results) - run.started
        self.scenarios["drain"] = {
            "jobs": c.jobs,
            "workers": c.drain_workers,
            "lease_batch": LEASE_BATCH,
            "lease_calls": run.total("lease_calls"),
            "ack_calls": run.total("ack_calls"),
            "calls": run.total("lease_calls") + run.total("ack_calls"),
            "empty_leases": run.total("empty_leases"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(c.jobs / seconds, 1),
            "cpu": self.cpu(run, c.jobs),
        }
        total = self.scenarios["batch_enqueue"]["seconds"] + seconds
        self.scenarios["drain"]["enqueue_and_drain_jobs_per_s"] = round(c.jobs / total, 1)
        self.say(f"  {self.scenarios['drain']['jobs_per_s']:,.0f} jobs/s")

    def limited(self) -> None:
        """The drain of a queue with `max_running`: workers asking for more than it allows,
        each holding its jobs a moment; how close to the limit's rate it runs, and how
        full the limit was kept (sampled while jobs were queued)."""
        c = self.config
        jobs = max(LIMITED_MAX_RUNNING * 10, c.jobs // 5)
        queue = "bench-limited"
        self.db(database.reset_jobs(self.url))
        self.db(database.queue_jobs(self.url, queue, jobs))
        limited = httpx.put(
            f"{self.base_url}/v1/queues/{queue}/settings",
            json={"max_running": LIMITED_MAX_RUNNING},
            timeout=30,
        )
        limited.raise_for_status()
        self.db(database.vacuum_analyze(self.url))
        self.say(
            f"limited drain: max_running {LIMITED_MAX_RUNNING}, {LIMITED_WORKERS} workers "
            f"leasing {LEASE_BATCH}, each job held {c.limited_hold_ms:.0f} ms"
        )
        stop = threading.Event()
        samples: list[int] = []
        sampler = threading.Thread(
            target=lambda: samples.extend(
                asyncio.run(database.sample_running(self.url, queue, 0.005, stop))
            )
        )
        sampler.start()
        try:
            generators = min(c.generators, LIMITED_WORKERS)
            run = self.generate(
                "drain",
                [
                    {"base_url": self.base_url, "queue": queue, "workers": share,
                     "max_jobs": LEASE_BATCH, "hold_seconds": c.limited_hold_ms / 1000,
                     "wait_seconds": 1}
                    for share in split(LIMITED_WORKERS, generators)
                ],
            )  # fmt: skip
        finally:
            stop.set()
            sampler.join()
        states = self.db(database.job_states(self.url))
        if run.total("jobs") != jobs or states != {"succeeded": jobs}:
            raise RuntimeError(f"limited drain: acked {run.total('jobs')} of {jobs}; {states}")
        seconds = max(r["last_done"] for r in run.results) - run.started
        ideal = LIMITED_MAX_RUNNING / (c.limited_hold_ms / 1000)
        self.scenarios["limited"] = {
            "jobs": jobs,
            "max_running": LIMITED_MAX_RUNNING,
            "workers": LIMITED_WORKERS,
            "lease_batch": LEASE_BATCH,
            "hold_ms": c.limited_hold_ms,
            "lease_calls": run.total("lease_calls"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(jobs / seconds, 1),
            "limit_jobs_per_s": round(ideal, 1),
            "of_limit_rate": round(jobs / seconds / ideal, 3),
            "running_mean": round(statistics.fmean(samples), 1) if samples else None,
            "running_max": max(samples, default=None),
            "kept_full": round(statistics.fmean(samples) / LIMITED_MAX_RUNNING, 3)
            if samples
            else None,
            "samples": len(samples),
            "cpu": self.cpu(run, jobs),
        }
        s = self.scenarios["limited"]
        self.say(
            f"  {s['jobs_per_s']:,.0f} jobs/s ({s['of_limit_rate']:.0%} of the limit's "
            f"{ideal:,.0f}); running {s['running_mean']} on average, at most "
            f"{s['running_max']} (limit {LIMITED_MAX_RUNNING})"
        )

    def dashboard(self) -> None:
        """The API calls behind the dashboard's queues page and a queue's page (stats, the
        hour's series, failed groups, a page of jobs, filtered), on a table holding
        `dashboard_rows` finished jobs: their latency, sequentially, p50/p95."""
        c = self.config
        rows = c.dashboard_rows
        self.db(database.reset_jobs(self.url))
        self.say(f"dashboard: filling {rows:,} finished rows, then its pages' calls")
        self.db(database.fill_finished(self.url, "bench-ui", rows))
        self.db(database.queue_jobs(self.url, "bench-ui", 1000))
        self.db(database.vacuum_analyze(self.url))
        calls = {
            "queues_page": ["/v1/queues", "/v1/queues/bench-ui/series?minutes=60"],
            "queue_page": [
                "/v1/queues/bench-ui", "/v1/queues/bench-ui/series?minutes=60",
                "/v1/queues/bench-ui/failed/groups", "/v1/jobs?queue=bench-ui&limit=50",
            ],
            "jobs_filtered": ["/v1/jobs?queue=bench-ui&state=queued&limit=50"],
            "jobs_next_page": [f"/v1/jobs?queue=bench-ui&limit=50&after={rows // 2}"],
        }  # fmt: skip
        results: dict[str, Any] = {"rows": rows}
        with httpx.Client(base_url=self.base_url, timeout=60) as http:
            for name, paths in calls.items():
                took: list[float] = []
                for _ in range(DASHBOARD_SAMPLES):
                    started = time.perf_counter()
                    for path in paths:
                        http.get(path).raise_for_status()
                    took.append((time.perf_counter() - started) * 1000)
                results[name] = latency_summary(took)
                self.say(f"  {name}: p50 {results[name]['p50_ms']:.0f} ms")
        self.scenarios["dashboard"] = results

    def run_enqueue(self, queue: str) -> GeneratorRun:
        """The batch enqueue load: `--jobs` jobs in batches, from concurrent producers."""
        c = self.config
        batches = [
            (first, min(c.enqueue_batch, c.jobs - first))
            for first in range(0, c.jobs, c.enqueue_batch)
        ]
        generators = min(c.generators, c.enqueue_concurrency, len(batches))
        return self.generate(
            "enqueue",
            [
                {
                    "base_url": self.base_url,
                    "queue": queue,
                    "batches": batches[g::generators],
                    "concurrency": share,
                }
                for g, share in enumerate(split(c.enqueue_concurrency, generators))
            ],
        )

    def enqueue_figures(self, run: GeneratorRun) -> dict[str, Any]:
        c = self.config
        seconds = max(r["t1"] for r in run.results) - run.started
        return {
            "jobs": c.jobs,
            "batch": c.enqueue_batch,
            "concurrency": c.enqueue_concurrency,
            "requests": run.total("requests"),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(c.jobs / seconds, 1),
            "request_latency": latency_summary(run.merged("request_ms")),
            "cpu": self.cpu(run, c.jobs),
        }

    def run_drain(self, queue: str) -> GeneratorRun:
        """The drain load: workers lease 100 and ack each batch, until `queue` is empty."""
        c = self.config
        generators = min(c.generators, c.drain_workers)
        return self.generate(
            "drain",
            [
                {"base_url": self.base_url, "queue": queue, "workers": share,
                 "max_jobs": LEASE_BATCH}
                for share in split(c.drain_workers, generators)
            ],
        )  # fmt: skip

    def run_single(self, queue: str, count: int | None = None) -> GeneratorRun:
        """The single-job load: loops of enqueue one, lease one, complete it; `count` jobs
        in all (by default the configuration's)."""
        c = self.config
        generators = min(c.generators, c.single_concurrency)
        return self.generate(
            "single",
            [
                {"base_url": self.base_url, "queue": queue, "jobs": jobs, "concurrency": share}
                for jobs, share in zip(
                    split(count or c.single_jobs, generators),
                    split(c.single_concurrency, generators),
                    strict=True,
                )
            ],
        )

    def single(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        self.say(
            f"single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} concurrent loops"
        )
        with self.idle_replica() as replica_seconds, self.profiled("single"):
            run = self.run_single("bench-single")
            idle_seconds = replica_seconds()
        states = self.db(database.job_states(self.url))
        if run.total("jobs") != c.single_jobs or states != {"succeeded": c.single_jobs}:
            raise RuntimeError(f"single: {run.total('jobs')} of {c.single_jobs}; table: {states}")
        self.scenarios["single"] = {
            **self.load_figures(run, c.single_jobs, "t1", concurrency=c.single_concurrency),
            "calls": run.total("calls"),  # the loads count every call, enqueues included
            "empty_leases": run.total("empty_leases"),
            # a second `jobq serve` on the database, serving nothing meanwhile
            "idle_replica_us_per_job": round(idle_seconds / c.single_jobs * 1e6, 2),
        }
        self.say(f"  {self.scenarios['single']['jobs_per_s']:,.0f} jobs/s")

    def latency(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        self.say(
            f"enqueue-to-lease latency: {c.latency_workers} workers waiting (wait_seconds 20), "
            f"{c.latency_samples} jobs one at a time every ~{c.latency_interval_ms:g} ms"
        )
        with self.profiled("latency"):
            run = self.run_wait_latency("bench-wait")
        self.scenarios["enqueue_to_lease"] = {
            "waiting_workers": c.latency_workers,
            "interval_ms": c.latency_interval_ms,
            **self.wait_latency_figures(run),
        }
        s = self.scenarios["enqueue_to_lease"]
        self.say(f"  p50 {s['p50_ms']:.2f} ms, p95 {s['p95_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms")

        # the same, bare: what PostgreSQL's durable commit, NOTIFY and LISTEN allow
        self.db(database.prepare_bare(self.url, 0))
        self.say("  bare: INSERT + NOTIFY (durable commit) -> LISTEN -> claim 1, asyncpg")
        bare = self.generate(
            "bare_wake",
            [
                {
                    "dsn": database.dsn(self.url),
                    "samples": c.latency_samples,
                    "interval_s": c.latency_interval_ms / 1000,
                }
            ],
        )
        s["bare"] = {
            **latency_summary(bare.merged("latency_ms")),
            "insert_commit": latency_summary(bare.merged("insert_ms")),
        }
        b = s["bare"]
        self.say(f"  bare p50 {b['p50_ms']:.2f} ms, p99 {b['p99_ms']:.2f} ms")

    def run_wait_latency(self, queue: str, *, floor: bool = False) -> GeneratorRun:
        c = self.config
        return self.generate(
            "wait_latency",
            [
                {
                    "base_url": self.base_url,
                    "queue": queue,
                    "workers": c.latency_workers,
                    "samples": c.latency_samples,
                    "interval_s": c.latency_interval_ms / 1000,
                    "settle_s": 1.0,
                    "notify": floor,
                }
            ],
        )

    def wait_latency_figures(self, run: GeneratorRun) -> dict[str, Any]:
        latencies = run.merged("latency_ms")
        expected = self.config.latency_samples
        if len(latencies) != expected:
            raise RuntimeError(f"latency: {len(latencies)} of {expected} jobs arrived")
        return {
            **latency_summary(latencies),
            "enqueue_request": latency_summary(run.merged("enqueue_ms")),
            "cpu": self.cpu(run, len(latencies)),
        }

    def _fill_progress(self, base: int) -> Callable[[int], None]:
        return lambda n: self.say(f"  {base + n:,} finished rows")

    def lease_levels(self) -> None:
        c = self.config
        self.db(database.reset_jobs(self.url))
        queue = "bench-lease"
        levels: list[dict[str, Any]] = []
        filled = 0
        for level in c.finished_rows:
            self.db(database.delete_unfinished(self.url))
            if level > filled:
                self.say(f"filling {level - filled:,} finished rows (to {level:,})")
                started = time.monotonic()
                self.db(
                    database.fill_finished(
                        self.url,
                        queue,
                        level - filled,
                        self._fill_progress(filled),
                    )
                )
                filled = level
                self.say(f"  filled in {time.monotonic() - started:.0f} s; VACUUM ANALYZE")
            self.db(database.vacuum_analyze(self.url))
            states = self.db(database.job_states(self.url))
            self.say(
                f"lease latency at {level:,} finished rows: {c.lease_calls} single lease calls"
            )
            run = self.generate(
                "lease_latency",
                [
                    {
                        "base_url": self.base_url,
                        "queue": queue,
                        "calls": c.lease_calls,
                        "warmup": c.lease_warmup,
                    }
                ],
            )
            summary = latency_summary(run.merged("latency_ms"))
            levels.append(
                {
                    "finished_rows": level,
                    "rows_in_table": sum(states.values()),
                    **summary,
                    "cpu": self.cpu(run, c.lease_calls),
                }
            )
            self.say(f"  p50 {summary['p50_ms']:.2f} ms, p95 {summary['p95_ms']:.2f} ms")
        first, last = levels[0], levels[-1]
        self.scenarios["lease_latency"] = {
            "calls_per_level": c.lease_calls,
            "levels": levels,
            "ratio_p50": ratio(last["p50_ms"], first["p50_ms"]),
            "ratio_p95": ratio(last["p95_ms"], first["p95_ms"]),
            "ratio_of": f"{last['finished_rows']:,} / {first['finished_rows']:,} finished rows",
        }

    def floor(self) -> None:
        """The drain and single-job loads against `bench.floor`: what the stack allows;
        then against its variant answering as jobq does (`bench.floor_whole`)."""
        c = self.config
        assert self.log_dir is not None
        floor = Service(
            self.url, workers=c.workers, log_path=self.log_dir / "floor.log", app="floor"
        )
        self.say(f"framework floor: FastAPI + one bare statement per call, --workers {c.workers}")
        results: dict[str, Any] = {}
        with floor, self.serving(floor):
            self.db(database.prepare_bare(self.url, 0))
            self.say(f"  batch enqueue: {c.jobs:,} jobs, {c.enqueue_batch} per call")
            run = self.run_enqueue("bench-floor")
            queued = self.db(database.bare_states(self.url)).get(0, 0)
            if queued != c.jobs:
                raise RuntimeError(f"floor batch enqueue: {queued} of {c.jobs} jobs inserted")
            results["batch_enqueue"] = self.enqueue_figures(run)
            self.say(f"    {results['batch_enqueue']['jobs_per_s']:,.0f} jobs/s")
            self.say(f"  drain: {c.jobs:,} jobs, {c.drain_workers} workers, lease {LEASE_BATCH}")
            run = self.run_drain("bench-floor")
            self._check_bare("floor drain", run.total("jobs"), c.jobs)
            results["drain"] = self._floor_drain(run)
            self.db(database.prepare_bare(self.url, 0))
            self.say(f"  single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} loops")
            run = self.run_single("bench-floor")
            self._check_bare("floor single", run.total("jobs"), c.single_jobs)
            results["single"] = self._floor_single(run)
            self.db(database.prepare_bare(self.url, 0))
            self.say(f"  enqueue-to-lease: {c.latency_workers} workers long-polling")
            results["enqueue_to_lease"] = self.wait_latency_figures(
                self.run_wait_latency("bench-floor", floor=True)
            )
            w = results["enqueue_to_lease"]
            self.say(f"    p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms")
        results["whole"] = self._floor_whole()
        self.scenarios["floor"] = results

    def _floor_whole(self) -> dict[str, Any]:
        """The drain and single-job path against the floor answering whole jobs."""
        c = self.config
        assert self.log_dir is not None
        floor = Service(
            self.url,
            workers=c.workers,
            log_path=self.log_dir / "floor-whole.log",
            app="floor",
            extra_env={ANSWER_VARIABLE: "whole"},
        )
        self.say("framework floor answering whole jobs, as jobq does (a table like jobq's)")
        results: dict[str, Any] = {}
        self.db(database.prepare_wide(self.url))
        with floor, self.serving(floor):
            self.run_enqueue("bench-floor")
            self.db(database.vacuum_analyze(self.url, "bench_wide"))  # as jobq's drain
            self.say(f"  drain: {c.jobs:,} jobs, {c.drain_workers} workers, lease {LEASE_BATCH}")
            run = self.run_drain("bench-floor")
            self._check_done("floor whole drain", run.total("jobs"), c.jobs, self._wide_done())
            results["drain"] = self._floor_drain(run)
            self.db(database.prepare_wide(self.url))
            self.say(f"  single-job path: {c.single_jobs:,} jobs, {c.single_concurrency} loops")
            run = self.run_single("bench-floor")
            done = self._wide_done()
            self._check_done("floor whole single", run.total("jobs"), c.single_jobs, done)
            results["single"] = self._floor_single(run)
        return results

    def _wide_done(self) -> int:
        return self.db(database.job_states(self.url, WIDE_TABLE)).get("succeeded", 0)

    def _floor_drain(self, run: GeneratorRun) -> dict[str, Any]:
        c = self.config
        return self._floor_figures(run, c.jobs, "last_done", workers=c.drain_workers)

    def _floor_single(self, run: GeneratorRun) -> dict[str, Any]:
        c = self.config
        return self._floor_figures(run, c.single_jobs, "t1", concurrency=c.single_concurrency)

    def _floor_figures(
        self, run: GeneratorRun, jobs: int, done_at: str, **shape: int
    ) -> dict[str, Any]:
        figures = self.load_figures(run, jobs, done_at, **shape)
        self.say(f"    {figures['jobs_per_s']:,.0f} jobs/s")
        return figures

    def load_figures(
        self, run: GeneratorRun, jobs: int, done_at: str, **shape: int
    ) -> dict[str, Any]:
        """A load's figures: `done_at` names each generator's time of its last job."""
        seconds = max(r[done_at] for r in run.results) - run.started
        return {
            "jobs": jobs,
            **shape,
            "seconds": round(seconds, 3),
            "jobs_per_s": round(jobs / seconds, 1),
            "cpu": self.cpu(run, jobs),
        }
