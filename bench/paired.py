"""jobq and the floors back to back, in rounds: the drain, the single-job path and
enqueue-to-lease.

This machine's speed drifts by tens of percent within minutes. The `drain`, `single` and
`latency` scenarios and the floors' loads run minutes apart, so their ratios carry that
drift (the single-job path's jobq / floor from 0.68 to 1.08 in one morning's runs; the
drain's service CPU per job 35 and 60 µs in two runs of the same code). Here the loads
run one right after the other, in a rotating order, several rounds: the drain and the
single-job path through jobq, the framework floor and the floor answering whole jobs,
then enqueue-to-lease with workers waiting through jobq and the framework floor. Each
round gives its ratios, and their median judges the targets against the floors. Every
service stays up throughout, idle while another serves.
"""

from __future__ import annotations

import statistics
from contextlib import ExitStack
from typing import Any

from bench import database
from bench.floor import ANSWER_VARIABLE
from bench.scenarios import Scenarios
from bench.service import Service
from bench.stats import ratio

LEGS = ("jobq", "floor", "whole")  # jobq; the framework floor; the floor answering whole jobs
WAIT_LEGS = ("jobq", "floor")  # the whole-job floor does not long-poll
LOADS = ("drain", "single")
LOAD_RATIOS = ("vs_floor", "vs_floor_whole", "floor_whole_vs_floor")
WAIT_RATIOS = ("p50_vs_floor", "p99_vs_floor")
QUEUE = "bench-paired"
WARMUP_JOBS = 200  # through each floor before the rounds (jobq's warm-up is the run's)


def _rotated(legs: tuple[str, ...], number: int) -> tuple[str, ...]:
    turn = number % len(legs)
    return legs[turn:] + legs[:turn]


def _median(rounds: list[dict[str, Any]], part: str, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: statistics.median(r[part][key] for r in rounds) for key in keys}


class Paired(Scenarios):
    """The `paired` scenario: jobq's and the floors' loads, back to back."""

    def paired(self) -> None:
        c = self.config
        assert self.log_dir is not None and self.service is not None
        floors = {
            "floor": Service(
                self.url, workers=c.workers, log_path=self.log_dir / "paired-floor.log",
                app="floor",
            ),
            "whole": Service(
                self.url, workers=c.workers, log_path=self.log_dir / "paired-whole.log",
                app="floor", extra_env={ANSWER_VARIABLE: "whole"},
            ),
        }  # fmt: skip
        self.say(
            f"back to back, {c.paired_rounds} rounds, through jobq, the floor and the "
            f"whole-job floor: the drain ({c.paired_drain_jobs:,} jobs, {c.drain_workers} "
            f"workers), the single-job path ({c.paired_jobs:,} jobs, {c.single_concurrency} "
            f"loops); then enqueue-to-lease through jobq and the floor ({c.latency_samples} "
            f"jobs, {c.latency_workers} workers waiting)"
        )
        self.db(database.prepare_wide(self.url))
        rounds: list[dict[str, Any]] = []
        with ExitStack() as stack:
            for leg, floor in floors.items():
                stack.enter_context(floor)
                self._empty(leg)
                with self.serving(floor):
                    self.run_single(QUEUE, WARMUP_JOBS)
            services = {"jobq": self.service, **floors}
            for number in range(c.paired_rounds):
                rounds.append(self._round(number, services))
        self.scenarios["paired"] = {
            "drain_jobs": c.paired_drain_jobs,
            "drain_workers": c.drain_workers,
            "single_jobs": c.paired_jobs,
            "single_concurrency": c.single_concurrency,
            "latency_samples": c.latency_samples,
            "rounds": rounds,
            "median": {
                **{load: _median(rounds, load, (*LEGS, *LOAD_RATIOS)) for load in LOADS},
                "wait": _median(rounds, "wait", WAIT_RATIOS),
            },
        }

    def _round(self, number: int, services: dict[str, Service]) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        order = _rotated(LEGS, number)
        for load in LOADS:
            runs = {leg: self._load(load, leg, services[leg]) for leg in order}
            rates = {leg: runs[leg][0] for leg in LEGS}
            figures[load] = {
                "order": list(order),
                **rates,
                "vs_floor": ratio(rates["jobq"], rates["floor"]),
                "vs_floor_whole": ratio(rates["jobq"], rates["whole"]),
                # what answering as jobq does costs, with none of jobq's logic
                "floor_whole_vs_floor": ratio(rates["whole"], rates["floor"]),
                "cpu": {leg: runs[leg][1] for leg in LEGS},
            }
        wait_order = _rotated(WAIT_LEGS, number)
        waits = {leg: self._wait(leg, services[leg]) for leg in wait_order}
        figures["wait"] = {
            "order": list(wait_order),
            **waits,
            "p50_vs_floor": ratio(waits["jobq"]["p50_ms"], waits["floor"]["p50_ms"]),
            "p99_vs_floor": ratio(waits["jobq"]["p99_ms"], waits["floor"]["p99_ms"]),
        }
        drain, single = figures["drain"], figures["single"]
        self.say(
            f"  round {number + 1}, jobs/s: drain jobq {drain['jobq']:,.0f}, floor "
            f"{drain['floor']:,.0f}, whole {drain['whole']:,.0f}; single jobq "
            f"{single['jobq']:,.0f}, floor {single['floor']:,.0f}, whole "
            f"{single['whole']:,.0f}; enqueue-to-lease p50 jobq {waits['jobq']['p50_ms']:.2f},"
            f" floor {waits['floor']['p50_ms']:.2f} ms"
        )
        return figures

    def _empty(self, leg: str, queued: int = 0) -> None:
        """A leg's table emptied, with `queued` jobs queued in it straight in SQL."""
        if leg == "jobq":
            self.db(database.reset_jobs(self.url))
            if queued:
                self.db(database.queue_jobs(self.url, QUEUE, queued))
        elif leg == "floor":
            self.db(database.prepare_bare(self.url, queued))
        else:
            self.db(database.prepare_wide(self.url, QUEUE, queued))

    def _done(self, leg: str) -> int:
        if leg == "jobq":
            return self.db(database.job_states(self.url)).get("succeeded", 0)
        if leg == "floor":
            return self.db(database.bare_states(self.url)).get(2, 0)
        return self._wide_done()

    def _load(self, load: str, leg: str, service: Service) -> tuple[float, dict[str, Any]]:
        """One load's jobs per second and CPU per job, every job of it checked done."""
        c = self.config
        if load == "drain":
            jobs, done_at = c.paired_drain_jobs, "last_done"
            self._empty(leg, jobs)
            with self.serving(service):
                run = self.run_drain(QUEUE)
        else:
            jobs, done_at = c.paired_jobs, "t1"
            self._empty(leg)
            with self.serving(service):
                run = self.run_single(QUEUE, jobs)
        self._check_done(f"paired {load} {leg}", run.total("jobs"), jobs, self._done(leg))
        figures = self.load_figures(run, jobs, done_at)
        return figures["jobs_per_s"], figures["cpu"]

    def _wait(self, leg: str, service: Service) -> dict[str, Any]:
        """Enqueue-to-lease with workers waiting, through one service: its latencies."""
        self._empty(leg)
        with self.serving(service):
            run = self.run_wait_latency(f"{QUEUE}-wait", floor=leg == "floor")
        return self.wait_latency_figures(run)
