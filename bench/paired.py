"""jobq and the floors back to back, in rounds: the single-job path and enqueue-to-lease.

This machine's speed drifts by tens of percent within minutes. The `single` and
`latency` scenarios and the floors' loads run minutes apart, so their ratios carry that
drift (the single-job path's jobq / floor from 0.68 to 1.08 in one morning's runs).
Here the loads run one right after the other, in a rotating order, several rounds: the
single-job path through jobq, the framework floor and the floor answering whole jobs,
then enqueue-to-lease with workers waiting through jobq and the framework floor. Each
round gives its ratios, and their median judges the targets. Every service stays up
throughout, idle while another serves.
"""

from __future__ import annotations

import statistics
from contextlib import ExitStack
from typing import Any

from bench import database
from bench.floor import ANSWER_VARIABLE
from bench.floor_whole import WIDE_TABLE
from bench.scenarios import Scenarios
from bench.service import Service
from bench.stats import ratio

LEGS = ("jobq", "floor", "whole")  # jobq; the framework floor; the floor answering whole jobs
WAIT_LEGS = ("jobq", "floor")  # the whole-job floor does not long-poll
RATIOS = (
    "single_vs_floor",
    "single_vs_floor_whole",
    "floor_whole_vs_floor",
    "wait_p50_vs_floor",
    "wait_p99_vs_floor",
)
WARMUP_JOBS = 200  # through each floor before the rounds (jobq's warm-up is the run's)


def _rotated(legs: tuple[str, ...], number: int) -> tuple[str, ...]:
    turn = number % len(legs)
    return legs[turn:] + legs[:turn]


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
            f"back to back, {c.paired_rounds} rounds: the single-job path through jobq, the "
            f"floor and the whole-job floor ({c.paired_jobs:,} jobs each, "
            f"{c.single_concurrency} loops), then enqueue-to-lease through jobq and the floor "
            f"({c.latency_samples} jobs each, {c.latency_workers} workers waiting)"
        )
        self.db(database.prepare_wide(self.url))
        rounds: list[dict[str, Any]] = []
        with ExitStack() as stack:
            for leg, floor in floors.items():
                stack.enter_context(floor)
                self._prepare(leg)
                with self.serving(floor):
                    self.run_single("bench-paired", WARMUP_JOBS)
            services = {"jobq": self.service, **floors}
            for number in range(c.paired_rounds):
                rounds.append(self._round(number, services))
        self.scenarios["paired"] = {
            "jobs": c.paired_jobs,
            "concurrency": c.single_concurrency,
            "latency_samples": c.latency_samples,
            "rounds": rounds,
            "median": {key: statistics.median(r[key] for r in rounds) for key in (*LEGS, *RATIOS)},
        }

    def _round(self, number: int, services: dict[str, Service]) -> dict[str, Any]:
        order = _rotated(LEGS, number)
        runs = {leg: self._single(leg, services[leg]) for leg in order}
        legs = {leg: runs[leg][0] for leg in LEGS}
        wait_order = _rotated(WAIT_LEGS, number)
        waits = {leg: self._wait(leg, services[leg]) for leg in wait_order}
        self.say(
            f"  round {number + 1}: jobq {legs['jobq']:,.0f}, floor {legs['floor']:,.0f}, "
            f"whole {legs['whole']:,.0f} jobs/s; enqueue-to-lease p50 jobq "
            f"{waits['jobq']['p50_ms']:.2f}, floor {waits['floor']['p50_ms']:.2f} ms"
        )
        return {
            **legs,
            "order": list(order),
            "single_vs_floor": ratio(legs["jobq"], legs["floor"]),
            "single_vs_floor_whole": ratio(legs["jobq"], legs["whole"]),
            # what answering as jobq does costs, with none of jobq's logic
            "floor_whole_vs_floor": ratio(legs["whole"], legs["floor"]),
            "cpu": {leg: runs[leg][1] for leg in LEGS},
            "wait_order": list(wait_order),
            "wait": waits,
            "wait_p50_vs_floor": ratio(waits["jobq"]["p50_ms"], waits["floor"]["p50_ms"]),
            "wait_p99_vs_floor": ratio(waits["jobq"]["p99_ms"], waits["floor"]["p99_ms"]),
        }

    def _prepare(self, leg: str) -> None:
        """Each leg's table emptied, as the scenarios it repeats leave them."""
        if leg == "jobq":
            self.db(database.reset_jobs(self.url))
        elif leg == "floor":
            self.db(database.prepare_bare(self.url, 0))
        else:
            self.db(database.prepare_wide(self.url))

    def _single(self, leg: str, service: Service) -> tuple[float, dict[str, Any]]:
        """One single-job load's jobs per second and CPU per job, every job checked done."""
        c = self.config
        self._prepare(leg)
        with self.serving(service):
            run = self.run_single("bench-paired", c.paired_jobs)
        if leg == "jobq":
            done = self.db(database.job_states(self.url)).get("succeeded", 0)
        elif leg == "floor":
            done = self.db(database.bare_states(self.url)).get(2, 0)
        else:
            done = self.db(database.job_states(self.url, WIDE_TABLE)).get("succeeded", 0)
        self._check_done(f"paired {leg}", run.total("jobs"), c.paired_jobs, done)
        seconds = float(max(r["t1"] for r in run.results)) - run.started
        return round(c.paired_jobs / seconds, 1), self.cpu(run, c.paired_jobs)

    def _wait(self, leg: str, service: Service) -> dict[str, Any]:
        """Enqueue-to-lease with workers waiting, through one service: its latencies."""
        self._prepare(leg)
        with self.serving(service):
            run = self.run_wait_latency("bench-paired-wait", floor=leg == "floor")
        return self.wait_latency_figures(run)
