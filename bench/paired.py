"""The single-job path of jobq and of both floors, back to back, in rounds.

This machine's speed drifts by tens of percent within minutes. The `single` scenario and
the floors' single-job loads run minutes apart, so their ratio carries that drift (from
0.68 to 1.08 in one afternoon's runs). Here the three loads run one right after the
other, in a rotating order, several rounds; each round gives its ratios, and their median
judges the single-job path. Every service stays up throughout, idle while another serves.
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
RATIOS = ("single_vs_floor", "single_vs_floor_whole", "floor_whole_vs_floor")
WARMUP_JOBS = 200  # through each floor before the rounds (jobq's warm-up is the run's)


class Paired(Scenarios):
    """The `paired` scenario: jobq's and the floors' single-job path, back to back."""

    def paired(self) -> None:
        c = self.config
        assert self.log_dir is not None and self.service is not None
        jobq = self.service
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
            f"single-job path back to back: jobq, the floor, the floor answering whole jobs; "
            f"{c.paired_rounds} rounds of {c.paired_jobs:,} jobs each, {c.single_concurrency} "
            "loops"
        )
        self.db(database.prepare_wide(self.url))
        rounds: list[dict[str, Any]] = []
        with ExitStack() as stack:
            for leg, floor in floors.items():
                stack.enter_context(floor)
                self._prepare(leg)
                with self.serving(floor):
                    self.run_single("bench-paired", WARMUP_JOBS)
            services = {"jobq": jobq, **floors}
            for number in range(c.paired_rounds):
                order = LEGS[number % len(LEGS) :] + LEGS[: number % len(LEGS)]
                runs = {leg: self._leg(leg, services[leg]) for leg in order}
                legs = {leg: runs[leg][0] for leg in LEGS}
                rounds.append(
                    {
                        **legs,
                        "order": list(order),
                        "single_vs_floor": ratio(legs["jobq"], legs["floor"]),
                        "single_vs_floor_whole": ratio(legs["jobq"], legs["whole"]),
                        # what answering as jobq does costs, with none of jobq's logic
                        "floor_whole_vs_floor": ratio(legs["whole"], legs["floor"]),
                        "cpu": {leg: runs[leg][1] for leg in LEGS},
                    }
                )
                self.say(
                    f"  round {number + 1}: jobq {legs['jobq']:,.0f}, floor "
                    f"{legs['floor']:,.0f}, whole {legs['whole']:,.0f} jobs/s"
                )
        self.scenarios["paired"] = {
            "jobs": c.paired_jobs,
            "concurrency": c.single_concurrency,
            "rounds": rounds,
            "median": {key: statistics.median(r[key] for r in rounds) for key in (*LEGS, *RATIOS)},
        }

    def _prepare(self, leg: str) -> None:
        """Each leg's table emptied, as the scenarios it repeats leave them."""
        if leg == "jobq":
            self.db(database.reset_jobs(self.url))
        elif leg == "floor":
            self.db(database.prepare_bare(self.url, 0))
        else:
            self.db(database.prepare_wide(self.url))

    def _leg(self, leg: str, service: Service) -> tuple[float, dict[str, Any]]:
        """One leg's jobs per second and CPU per job, every job of it checked done."""
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
