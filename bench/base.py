"""What every scenario of a run shares: its state, the load generators, the meters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from bench.cpu import Meters, TreeMeter, cpu_report
from bench.load import GeneratorRun, run_generators
from bench.options import RUN_TIMEOUT_SECONDS, Config
from bench.service import Service

T = TypeVar("T")
BUSY_GENERATOR_SHARE = 0.9  # of a core: above it, the generator may be the bottleneck


class Bench:
    """One run's state (the database, the service, the meters, the scenarios' results),
    and what every scenario uses to drive load and measure it."""

    def __init__(self, config: Config, console: Console, log_dir: Path) -> None:
        self.config = config
        self.console = console
        self.log_dir = log_dir  # the run's temporary folder, for service logs
        self.url = ""
        self.postmaster: int | None = None
        self._service: Service | None = None
        self._meters: Meters | None = None
        self.scenarios: dict[str, Any] = {}
        self.notes: list[str] = []

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")

    @staticmethod
    def db(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    @property
    def service(self) -> Service:
        assert self._service is not None
        return self._service

    @property
    def base_url(self) -> str:
        return self.service.url

    def generate(self, kind: str, params: list[dict[str, Any]]) -> GeneratorRun:
        """Run load `kind` in one generator process per entry of `params`."""
        assert self._meters is not None
        return run_generators(kind, params, self._meters, timeout=RUN_TIMEOUT_SECONDS)

    @contextmanager
    def serving(self, service: Service) -> Iterator[None]:
        """Point the generators and the service meter at `service` for a while."""
        saved = self._service, self._meters
        self._service = service
        self._meters = Meters(
            TreeMeter(service.pid), TreeMeter(self.postmaster) if self.postmaster else None
        )
        try:
            yield
        finally:
            self._service, self._meters = saved

    def cpu(self, run: GeneratorRun, jobs: int) -> dict[str, Any]:
        result = cpu_report(
            run.before, run.after, jobs=jobs, generator_seconds=run.generator_cpu_seconds
        )
        busiest = max(float(r["cpu_s"]) for r in run.results) / float(result["window_s"])
        result["generator_busiest_process_cores"] = round(busiest, 3)
        if busiest > BUSY_GENERATOR_SHARE:
            self.notes.append(
                "a load generator process was busy >90% of a core: the generator may be the "
                "bottleneck (try --generators 2)"
            )
        return result

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

    @contextmanager
    def idle_replica(self) -> Iterator[Callable[[], float]]:
        """Another `jobq serve` process on the same database, serving nothing: yields a
        function giving the CPU seconds it has used since (what each replica of a
        deployment pays for work done elsewhere)."""
        replica = Service(
            self.url,
            workers=1,
            log_path=self.log_dir / "idle-replica.log",
            extra_env=self.config.service_env,
        )
        with replica:
            meter = TreeMeter(replica.pid)
            start = sum(meter.per_process().values())
            yield lambda: sum(meter.per_process().values()) - start

    @staticmethod
    def check_done(what: str, acked: int, expected: int, done: int) -> None:
        """Every job acked by the load and done in the table, or the run is void."""
        if acked != expected or done != expected:
            raise RuntimeError(f"{what}: {acked} acked, {done} done, {expected} expected")
