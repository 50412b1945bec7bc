"""The chaos harness's matching of evidence to faults: a reap's record carries its
transaction's start, which may come well before the stop that took its log line."""

from __future__ import annotations

from tests.processes.chaos.procs import Fault
from tests.processes.chaos.verdict import near

KILL = Fault("service_sigkill", 10.0, 10.2, {})


def test_a_time_within_the_slack_of_a_fault_is_near_it() -> None:
    assert near(9.6, [KILL], slack=0.5) is KILL
    assert near(10.6, [KILL], slack=0.5) is KILL
    assert near(9.4, [KILL], slack=0.5) is None
    assert near(10.8, [KILL], slack=0.5) is None


def test_a_longer_lead_reaches_back_before_the_fault_only() -> None:
    assert near(7.5, [KILL], slack=0.5, before=3.0) is KILL
    assert near(6.9, [KILL], slack=0.5, before=3.0) is None
    assert near(10.8, [KILL], slack=0.5, before=3.0) is None
