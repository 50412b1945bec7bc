"""What the SDK and client tests share: a real `jobq serve`, a scriptable HTTP proxy, waits.

The service is its own process on the test database (as `make run` would start it),
with retries immediate (`JOBQ_BACKOFF_BASE_SECONDS=0`) and a reaper every half second,
so that tests about retries and lapsed leases take seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx

from jobq_client import Worker
from tests.helpers import answers, free_port

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 30.0
SERVICE_SETTINGS = {
    "JOBQ_BACKOFF_BASE_SECONDS": "0",
    "JOBQ_BACKOFF_JITTER": "0",
    "JOBQ_REAPER_INTERVAL_SECONDS": "0.5",
    "JOBQ_MIGRATE_ON_START": "false",  # the session fixture migrated the test database
    "JOBQ_SHUTDOWN_GRACE_SECONDS": "2",
}
T = TypeVar("T")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any JOBQ_ variable, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBQ_")}
    env.update(extra)
    return env


def stop_process(process: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> int:
    """Send `sig` and wait (kill after a timeout); the exit code."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        name = signal.Signals(sig).name
        raise AssertionError(f"process {process.args!r} ignored {name}") from None


@dataclass
class Service:
    """A `jobq serve` process; `url` is where it answers."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_service(database_url: str, log: Path, **settings: str) -> Service:
    """`jobq serve` on a free port, with `SERVICE_SETTINGS` and `settings` (JOBQ_…)."""
    port = free_port()
    env = clean_env(JOBQ_DATABASE_URL=database_url, **{**SERVICE_SETTINGS, **settings})
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    service = Service(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    with httpx.Client(timeout=1) as http:  # one: each new client reads the CA bundle
        while True:
            if process.poll() is not None:
                raise AssertionError(f"jobq serve exited:\n{service.output()}")
            if answers(http, f"{service.url}/healthz", process.pid, port):
                return service
            if time.monotonic() > deadline:
                stop_process(process)
                raise AssertionError(f"jobq serve did not start:\n{service.output()}")
            time.sleep(0.1)


def running_service(database_url: str, log: Path, **settings: str) -> Iterator[Service]:
    """For a fixture: a service for the duration, stopped cleanly after."""
    service = start_service(database_url, log, **settings)
    try:
        yield service
    finally:
        stop_process(service.process)


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """The worker runs in this event loop for the block; then it is stopped and drained."""
    task = asyncio.create_task(worker.run_async())
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 15.0, every: float = 0.05
) -> T:
    """Poll until `probe` returns something other than None (or False); fail after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last is not None and last is not False:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"not within {timeout} s (last probe: {last!r})")


# ---- a proxy that can answer in the service's place ------------------------------------


@dataclass(frozen=True)
class Seen:
    """A request as the proxy received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Respond:
    """Answer with this instead of asking the service; `forward_first` still asks it
    (the request takes effect) and throws its answer away, as a lost answer would."""

    status: int
    body: bytes = b""
    content_type: str = "application/problem+json"
    forward_first: bool = False
    headers: dict[str, str] = field(default_factory=dict)


def problem(status: int, code: str, detail: str = "scripted by the test") -> bytes:
    """A problem+json body."""
    body = {"type": f"urn:jobq:problem:{code}", "title": code, "status": status}
    return json.dumps({**body, "detail": detail, "code": code}).encode()


class Proxy:
    """An HTTP server in a thread in front of `upstream`; `plan` scripts the next answers.

    Each request takes the first `Respond` of `plan` (or is forwarded when the plan is
    empty) and is recorded in `seen`.
    """

    def __init__(self, upstream: str, port: int = 0) -> None:
        self.upstream = upstream
        self.plan: list[Respond] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._forward = httpx.Client(base_url=upstream, timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {key.lower(): value for key, value in self.headers.items()}
                with proxy._lock:
                    proxy.seen.append(Seen(self.command, self.path, headers, body))
                    step = proxy.plan.pop(0) if proxy.plan else None
                if step is None or step.forward_first:
                    skip = {"host", "content-length", "connection", "accept-encoding"}
                    try:
                        answer = proxy._forward.request(
                            self.command,
                            self.path,
                            content=body,
                            headers={k: v for k, v in headers.items() if k not in skip},
                        )
                    except httpx.HTTPError:
                        self.close_connection = True  # closing down: hang up
                        return
                if step is None:
                    status, payload = answer.status_code, answer.content
                    content_type = answer.headers.get("content-type", "application/json")
                    extra: dict[str, str] = {}
                else:
                    status, payload, content_type = step.status, step.body, step.content_type
                    extra = step.headers
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _handle  # noqa: N815 (http.server's names)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._forward.close()
