"""`jobq serve` (or the framework floor, `bench.floor`) as a subprocess of the benchmark:
started, waited for, always stopped."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Literal

import httpx
import psutil

from bench.database import dsn
from bench.floor import DSN_VARIABLE

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 40.0
ACCESS_LOGGER = "uvicorn.access"
# a line logged at ERROR or above, in the JSON format or the text one
_ERROR_LEVEL = re.compile(r'"level":"(?:error|critical)"| (?:ERROR|CRITICAL) ')


class ServiceError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Service:
    """`python -m app serve --workers N` on `database_url`, its output in `log_path`.

    `app="floor"` serves `bench.floor` instead, on the same uvicorn settings as jobq's;
    `app="endpoint"`, the push scenario's endpoint (`bench.push_endpoint`).
    """

    def __init__(
        self,
        database_url: str,
        *,
        workers: int,
        log_path: Path,
        extra_env: Mapping[str, str] | None = None,
        app: Literal["jobq", "floor", "endpoint"] = "jobq",
    ) -> None:
        self.app = app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.log_path = log_path
        self.env = {k: v for k, v in os.environ.items() if k != "JOBQ_WORKERS"}
        self.env["JOBQ_DATABASE_URL"] = database_url
        self.env["JOBQ_MIGRATE_ON_START"] = "false"  # the benchmark migrated already
        if app == "floor":  # the floor's own pool is plain asyncpg
            self.env[DSN_VARIABLE] = dsn(database_url)
        # `app` must be this checkout's, whatever is installed in the interpreter
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        self.env.update(extra_env or {})
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self) -> list[str]:
        port, workers = str(self.port), str(self.workers)
        if self.app == "jobq":
            return [sys.executable, "-m", "app", "serve", "--port", port, "--workers", workers]
        # uvicorn as `jobq serve` runs it (app/cli.py): the same loop and HTTP parser
        # (uvloop and httptools, where installed), no proxy headers, no access log
        app = ["bench.floor:create_app", "--factory"]
        if self.app == "endpoint":
            app = ["bench.push_endpoint:app"]
        return [
            *(sys.executable, "-m", "uvicorn", *app),
            *("--host", "127.0.0.1", "--port", port, "--workers", workers),
            *("--no-proxy-headers", "--no-server-header", "--no-access-log"),
            *("--log-level", "warning"),
        ]

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                self.command(),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # our signals only: a Ctrl-C reaches us, we stop it
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with httpx.Client(timeout=2) as http:  # one: each new client reads the CA bundle
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServiceError(f"{self.app} service exited at start:\n{self.log_tail()}")
                with contextlib.suppress(httpx.TransportError):
                    if http.get(f"{self.url}/readyz").status_code == 200:
                        self._wait_for_workers(deadline)
                        return
                time.sleep(0.2)
        raise ServiceError(f"{self.app} service not ready in {START_TIMEOUT_SECONDS:.0f} s")

    def _wait_for_workers(self, deadline: float) -> None:
        """With several processes, wait until every one of them answers."""
        if self.workers == 1:
            return
        while time.monotonic() < deadline:
            children = psutil.Process(self.pid).children()
            serving = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
            if len(serving) >= self.workers:
                time.sleep(1.0)  # each builds its app and pool: let them settle
                return
            time.sleep(0.2)
        raise ServiceError(f"jobq serve did not start {self.workers} worker processes")

    def stop(self) -> int | None:
        """SIGTERM, wait for a clean exit (SIGKILL after a timeout); the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        """The log's last `lines`, after any error logged before them (the first 10):
        the cause of a failure is often an error far above the tail."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        every = text.splitlines()
        earlier = [line for line in every[:-lines] if _ERROR_LEVEL.search(line)][:10]
        if earlier:
            earlier = ["(errors above the tail)", *earlier, "(the tail)"]
        return "\n".join([*earlier, *every[-lines:]])

    def access_log_lines(self) -> int:
        """How many requests uvicorn wrote an access-log line for."""
        try:
            with self.log_path.open("rb") as log:
                return sum(1 for line in log if ACCESS_LOGGER.encode() in line)
        except OSError:
            return 0

    def __enter__(self) -> Service:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
