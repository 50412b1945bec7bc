"""CPU accounting with psutil: the service's process tree, PostgreSQL's, the whole machine.

A process tree's CPU time is, over its live members, user + system + the times of the
children each member already reaped (`children_user`, `children_system`). PostgreSQL's
backends come and go with connections: a backend that exits during a scenario moves
from "live" into its postmaster's reaped-children times, so it is still counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import psutil


def _own_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


class TreeMeter:
    """CPU seconds used so far by a process and all its descendants, dead or alive."""

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._root = psutil.Process(root_pid)
        self._started = self._root.create_time()

    def alive(self) -> bool:
        """Still the same process (not exited, its pid not reused)?"""
        try:
            return self._root.is_running() and self._root.create_time() == self._started
        except psutil.Error:
            return False

    def per_process(self) -> dict[int, float]:
        """CPU seconds per live member of the tree (each including its reaped children)."""
        members = [self._root]
        try:
            members += self._root.children(recursive=True)
        except psutil.NoSuchProcess:
            return {}
        seconds: dict[int, float] = {}
        for proc in members:
            try:
                seconds[proc.pid] = _own_seconds(proc)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue  # exited meanwhile: its parent reaps it into children_* times
        return seconds


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy so far (user, nice, system, interrupts)."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


@dataclass(frozen=True)
class Sample:
    """One reading of every meter."""

    wall: float
    service: dict[int, float]
    postgres: dict[int, float] | None
    machine_busy: float


@dataclass
class Meters:
    """The meters of one benchmark run: the service tree, PostgreSQL's tree (when local)."""

    service: TreeMeter
    postgres: TreeMeter | None
    cores: int = field(default_factory=lambda: psutil.cpu_count() or 1)

    def sample(self) -> Sample:
        return Sample(
            wall=time.monotonic(),
            service=self.service.per_process(),
            postgres=self.postgres.per_process() if self.postgres else None,
            machine_busy=machine_busy_seconds(),
        )


def _tree_delta(before: dict[int, float], after: dict[int, float]) -> float:
    # A member born during the window counts from zero; one that died is in its parent's
    # reaped-children times by now (the parent being a member too).
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def cpu_report(
    before: Sample, after: Sample, *, jobs: int, generator_seconds: float
) -> dict[str, Any]:
    """CPU used between two samples: seconds, cores busy on average, and µs per job."""
    window = max(after.wall - before.wall, 1e-9)
    service = _tree_delta(before.service, after.service)
    postgres = (
        _tree_delta(before.postgres, after.postgres)
        if before.postgres is not None and after.postgres is not None
        else None
    )
    busy = after.machine_busy - before.machine_busy
    ours = service + (postgres or 0.0) + generator_seconds
    per_process = sorted(
        (round(after.service[pid] - before.service.get(pid, 0.0), 3) for pid in after.service),
        reverse=True,
    )

    def per_job(seconds: float | None) -> float | None:
        return None if seconds is None or jobs <= 0 else round(seconds / jobs * 1e6, 2)

    def cores(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds / window, 3)

    return {
        "window_s": round(window, 3),
        "jobs": jobs,
        "service_us_per_job": per_job(service),
        "postgres_us_per_job": per_job(postgres),
        "generator_us_per_job": per_job(generator_seconds),
        "service_s": round(service, 3),
        "postgres_s": None if postgres is None else round(postgres, 3),
        "generator_s": round(generator_seconds, 3),
        "service_cores": cores(service),
        "postgres_cores": cores(postgres),
        "generator_cores": cores(generator_seconds),
        "machine_busy_cores": cores(busy),
        # busy time of everything else on the machine (other programs, the kernel's
        # share not charged to a process, this orchestrator): noise if it is large
        "other_cores": cores(max(busy - ours, 0.0)),
        "service_process_s": [s for s in per_process if s > 0],
    }
