"""What every scenario of a run shares: its state, the load generators, the meters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import database
from bench.cpu import Meters, TreeMeter, cpu_report
from bench.load import GeneratorRun, run_generators
from bench.options import PROFILED_SCENARIOS, RUN_TIMEOUT_SECONDS, Config, T
from bench.profile import Profiler, summarize
from bench.service import Service


class BenchBase:
    """One run's state: the database, the service, the meters, the scenarios' results; and
    what every scenario uses to drive load and measure it."""

    def __init__(
        self,
        config: Config,
        console: Console,
        *,
        database_url: str | None = None,
        profile_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.database_url = database_url
        self.console = console
        self.profile_dir = profile_dir
        self.url = ""
        self.service: Service | None = None
        self.meters: Meters | None = None
        self.scenarios: dict[str, Any] = {}
        self.profiles: dict[str, Any] = {}
        self.notes: list[str] = []
        self.spread: list[int] = []  # client connections per service process, last load
        self.postmaster: int | None = None
        self.log_dir: Path | None = None  # the run's temporary folder, for service logs

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")

    @staticmethod
    def db(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    @property
    def base_url(self) -> str:
        assert self.service is not None
        return self.service.url

    def generate(self, kind: str, params: list[dict[str, Any]]) -> GeneratorRun:
        assert self.meters is not None and self.service is not None
        service = self.service

        def spread() -> None:
            self.spread = service.connections_per_process()

        self.spread = []
        return run_generators(
            kind, params, self.meters, timeout=RUN_TIMEOUT_SECONDS, on_ready=spread
        )

    @contextmanager
    def profiled(self, name: str) -> Iterator[None]:
        if self.profile_dir is None or name not in PROFILED_SCENARIOS or self.service is None:
            yield
            return
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        output = self.profile_dir / f"{name}.txt"
        with Profiler(self.service.pid, output):
            yield
        if output.exists():
            self.profiles[name] = {"file": str(output), **summarize(output)}
        else:
            self.notes.append(
                f"py-spy wrote no profile for {name}: see {output.with_suffix('.log')}"
            )

    def cpu(self, run: GeneratorRun, jobs: int) -> dict[str, Any]:
        result = cpu_report(
            run.before, run.after, jobs=jobs, generator_seconds=run.generator_cpu_seconds
        )
        busiest = max(float(r["cpu_s"]) for r in run.results) / float(result["window_s"])
        result["generator_busiest_process_cores"] = round(busiest, 3)
        result["service_connections_per_process"] = self.spread
        if busiest > 0.9:
            self.notes.append(
                "a load generator process was busy >90% of a core: the generator may be the "
                "bottleneck (try --generators 2)"
            )
        return result

    @contextmanager
    def idle_replica(self) -> Iterator[Callable[[], float]]:
        """Another `jobq serve` process on the same database, serving nothing: yields a
        function giving the CPU seconds it has used since (what each replica of a
        deployment pays for work done elsewhere)."""
        assert self.log_dir is not None
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

    @contextmanager
    def serving(self, service: Service) -> Iterator[None]:
        """Point the generators and the service meter at `service` for a while."""
        saved = self.service, self.meters
        self.service = service
        self.meters = Meters(
            TreeMeter(service.pid), TreeMeter(self.postmaster) if self.postmaster else None
        )
        try:
            yield
        finally:
            self.service, self.meters = saved

    def _check_bare(self, what: str, acked: int, expected: int) -> None:
        self._check_done(what, acked, expected, self.db(database.bare_states(self.url)).get(2, 0))

    def _check_done(self, what: str, acked: int, expected: int, done: int) -> None:
        """Every job acked by the load and done in the table, or the run is void."""
        if acked != expected or done != expected:
            raise RuntimeError(f"{what}: {acked} acked, {done} done, {expected} expected")
