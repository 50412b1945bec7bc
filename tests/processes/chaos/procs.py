"""The processes a run starts: `jobq serve` services and the producer and worker clients."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.processes.chaos import (
    read_events,
)
from tests.processes.chaos.options import (
    REPO,
    SERVICE_ENV,
    START_TIMEOUT_SECONDS,
    STOP_TIMEOUT_SECONDS,
    HarnessError,
)


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQ_")}
    return {**env, **extra}


@dataclass(slots=True)
class Exit:
    """How one process ended."""

    name: str
    pid: int
    how: str  # sigkill, sigterm, done, died
    returncode: int | None
    at: float


class Proc:
    """A child process writing to its log; started again under the same name when asked."""

    def __init__(self, name: str, log_path: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log_path = log_path
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.every: list[subprocess.Popen[bytes]] = []  # all generations, for the teardown
        self.generation = 0
        self.exits: list[Exit] = []
        self.stopping = False  # an exit the harness asked for is under way

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        if self.running():
            raise HarnessError(f"{self.name} is already running")
        self.generation += 1
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.every.append(self.process)

    def kill_all(self) -> None:
        """SIGKILL every generation still alive (the teardown, even after a failure)."""
        for process in self.every:
            if process.poll() is None:
                process.kill()
                process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reap(self) -> Exit | None:
        """The exit of a process that ended without being asked to."""
        if self.stopping or self.process is None or self.process.poll() is None:
            return None
        gone = Exit(self.name, self.pid, "died", self.process.returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    def kill(self) -> Exit:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        gone = Exit(self.name, self.pid, "sigkill", self.process.returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    async def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> Exit:
        """SIGTERM, wait (SIGKILL after `timeout`); returncode None means it had to be killed."""
        assert self.process is not None
        process = self.process
        self.stopping = True
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            returncode = process.poll()
            if returncode is None:
                process.kill()
                process.wait()
        finally:
            self.stopping = False
        gone = Exit(self.name, process.pid, "sigterm", returncode, time.time())
        self.exits.append(gone)
        self.process = None
        return gone

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Service(Proc):
    """One `jobq serve` process on a fixed port."""

    def __init__(self, index: int, port: int, log_dir: Path, database_url: str) -> None:
        super().__init__(
            f"service-{index}",
            log_dir / f"service-{index}.log",
            child_env({**SERVICE_ENV, "JOBQ_DATABASE_URL": database_url}),
        )
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "app", "serve", "--port", str(self.port)]

    async def wait_ready(self, client: httpx.AsyncClient) -> None:
        """Until it answers a request that reaches the database."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if not self.running():
                raise HarnessError(f"{self.name} exited while starting:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                ready = await client.get(f"{self.url}/readyz", timeout=2)
                if ready.status_code == 404:  # a service without /readyz
                    ready = await client.get(f"{self.url}/v1/jobs?limit=1", timeout=2)
                if ready.status_code == 200:
                    return
            await asyncio.sleep(0.1)
        raise HarnessError(f"{self.name} was not ready in time:\n{self.log_tail()}")


class Client(Proc):
    """A worker or producer process, with one event log per generation."""

    def __init__(self, name: str, module: str, args: list[str], run_dir: Path, env: dict[str, str]):
        super().__init__(name, run_dir / "logs" / f"{name}.log", env)
        self.module = module
        self.args = args
        self.events_dir = run_dir / "events"

    @property
    def events_path(self) -> Path:
        return self.events_dir / f"{self.name}-{self.generation}.jsonl"

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            self.module,
            *self.args,
            "--events",
            str(self.events_path),
        ]

    def in_flight(self) -> list[dict[str, Any]]:
        """Executions this generation started and did not finish."""
        if not self.events_path.exists():
            return []
        started: dict[str, dict[str, Any]] = {}
        for record in read_events(self.events_path):
            if record["ev"] == "start":
                started[record["lease"]] = record
            elif record["ev"] == "end":
                started.pop(record["lease"], None)
        return list(started.values())


# ---- the run ---------------------------------------------------------------------------


@dataclass(slots=True)
class Fault:
    kind: str  # worker_sigkill, service_sigkill, rolling_restart, postgres_restart, stale_completer
    started: float
    ended: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Probe:
    """One request the harness made to a service while PostgreSQL restarted."""

    service: str
    path: str  # a key of PROBES
    sent: float
    seconds: float
    status: int | None  # None: no answer (connection error or timeout)
    code: str | None

    def within(self, start: float, end: float) -> bool:
        """Sent and answered between `start` and `end`."""
        return start <= self.sent and self.sent + self.seconds <= end
