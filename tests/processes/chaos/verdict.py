"""The verdict: broken invariants by kind with examples, and what every check reads."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from tests.processes.chaos.evidence import Evidence, Execution
from tests.processes.chaos.options import CRASHES, EXAMPLES, FAULT_SLACK_SECONDS
from tests.processes.chaos.procs import Fault
from tests.processes.chaos.run import Run


class Verdict:
    """Broken invariants by kind, with a few examples each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def fail(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    @property
    def ok(self) -> bool:
        return not self.counts

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {"invariant": kind, "count": count, "examples": self.examples[kind]}
            for kind, count in self.counts.most_common()
        ]


def near(
    t: float,
    faults: Iterable[Fault],
    slack: float = FAULT_SLACK_SECONDS,
    before: float | None = None,
) -> Fault | None:
    """A fault whose span (± slack; `before` it, when given) contains `t`."""
    lead = slack if before is None else before
    return next((f for f in faults if f.started - lead <= t <= f.ended + slack), None)


class CheckBase:
    """What every group of invariants reads: the run, its evidence, and the verdict so far."""

    def __init__(self, run: Run, evidence: Evidence) -> None:
        self.run = run
        self.opts = run.opts
        self.ev = evidence
        self.jobs = evidence.jobs
        self.v = Verdict()
        self.records = {a.lease: a for job in self.jobs.values() for a in job.attempts}
        self.by_lease: dict[str, list[Execution]] = defaultdict(list)
        for execution in evidence.executions:
            self.by_lease[execution.lease].append(execution)
        self.crashes = [f for f in run.faults if f.kind in CRASHES]
        self.figures: dict[str, Any] = {}
