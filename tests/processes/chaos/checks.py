"""All the invariants of a run, checked in one pass."""

from __future__ import annotations

from typing import Any

from tests.processes.chaos.checks_executions import ExecutionChecks
from tests.processes.chaos.checks_jobs import JobChecks
from tests.processes.chaos.checks_service import ServiceChecks


class Checks(JobChecks, ExecutionChecks, ServiceChecks):
    """Every invariant of the run, from the database, the API, the logs."""

    def all(self) -> dict[str, Any]:
        self.figures["producers"] = self.producers()
        self.figures["jobs"] = self.final_states()
        self.figures["executions"] = self.executions()
        self.figures["heartbeats"] = self.heartbeats()
        self.figures["reaper"] = self.reaper()
        self.figures["http"] = self.http()
        self.figures["faults"] = self.faults()
        self.figures["api"] = self.api()
        lost = self.figures["producers"]["lost"] + self.figures["jobs"]["unfinished"]
        self.figures["lost"] = lost
        return self.figures
