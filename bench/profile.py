"""Optional sampling profiles of the service with py-spy (`--profile DIR`).

py-spy attaches to the service's processes during a scenario and writes collapsed
stacks (`<scenario>.txt`, one `frame;frame;... count` line per distinct stack) of the
samples in which the service held the GIL, i.e. ran Python rather than waited. The
summary ranks functions by the samples in which they were running (self) and by the
samples in which they were on the stack (inclusive; jobq's own functions separately),
and groups the self samples by package, so the report says where the service's CPU
goes. Time in C code that releases the GIL (PostgreSQL I/O, epoll) is not sampled.

Profiling slows the service down: a profiled run's throughput is not a measurement.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

PYSPY_RATE_HZ = 100
ATTACH_SECONDS = 1.5
TOP = 25
ROOT_SHARE = 0.75
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_PROCESS = re.compile(r'^process \d+:".*?"(?:;|$)')
_PACKAGE = re.compile(r"(?:site-packages|dist-packages)/(?P<package>[A-Za-z0-9_]+)")


def pyspy_path() -> str | None:
    """py-spy next to this interpreter, or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiler:
    """`py-spy record` on a process and its subprocesses, for the duration of a block."""

    def __init__(self, pid: int, output: Path) -> None:
        pyspy = pyspy_path()
        if pyspy is None:
            raise RuntimeError("--profile needs py-spy: pip install py-spy")
        self.command = [
            pyspy,
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--rate",
            str(PYSPY_RATE_HZ),
            "--gil",  # samples holding the GIL: the service's Python at work, not waiting
            "--format",
            "raw",
            "--output",
            str(output),
        ]
        self.output = output
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        log = self.output.with_suffix(".log").open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - py-spy with our arguments
            self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        time.sleep(ATTACH_SECONDS)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)  # py-spy writes its output and exits
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _function(frame: str) -> str:
    """`function (file:line)` without the line, so a function's lines add up."""
    match = _FRAME.match(frame.strip())
    return f"{match['function']} ({match['file']})" if match else frame.strip()


def _package(frame: str) -> str:
    """The top-level package or module a frame's code belongs to (`sqlalchemy`, `app`)."""
    match = _FRAME.match(frame.strip())
    path = match["file"] if match else frame
    found = _PACKAGE.search(path)  # a full path, when py-spy gives one
    if found:
        return found["package"]
    if path.startswith("<"):
        return "(python internals)"
    return path.lstrip("/").split("/", 1)[0].removesuffix(".py") or "?"


def phase(frames: list[str]) -> str:
    """Which part of serving a request a sample belongs to (FastAPI on uvicorn)."""
    text = ";".join(frames)
    leaf = _package(frames[-1])
    if "logging/" in text:
        return "logging (uvicorn access log)"
    if "WorkerThread" in text or "run_in_threadpool" in text:
        return "threadpool hop (sync dependency)"
    if "_jsonb_decoder" in text:  # asyncpg decodes rows as they arrive, in its protocol
        return "database: JSONB decode of returned rows"
    handler = next((i for i, f in enumerate(frames) if "get_request_handler" in f), None)
    if handler is None:
        if leaf in ("asyncpg", "sqlalchemy"):
            return f"database: {leaf} (outside the handler's frames)"
        if leaf in ("uvicorn", "httptools", "starlette", "fastapi"):
            return "HTTP server and middleware"
        return "event loop and other (incl. socket I/O in C)"
    below = frames[handler + 1 :]
    if any("run_endpoint_function" in f for f in below):
        if leaf == "asyncpg":
            return "endpoint: asyncpg (protocol, records)"
        if leaf == "sqlalchemy":
            return "endpoint: SQLAlchemy (statement, result)"
        if leaf == "app":
            return "endpoint: jobq code"
        return f"endpoint: other ({leaf})"
    if any("solve_dependencies" in f or "request_body" in f for f in below):
        return "request parsing and validation"
    return "response validation and serialisation"


def summarize(path: Path) -> dict[str, Any]:
    """Top functions by self and inclusive samples, and self samples per package."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        stack = _PROCESS.sub("", stack)  # its command line may hold ';'
        frames = [f for f in stack.split(";") if f and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        own[_function(frames[-1])] += count
        packages[_package(frames[-1])] += count
        phases[phase(frames)] += count
        for function in {_function(f) for f in frames}:
            inclusive[function] += count
            if _package(function) == "app":
                ours[function] += count

    def top(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "samples": n, "percent": round(100 * n / total, 1)}
            for name, n in counter.most_common(TOP)
        ]

    # the frames every sample passes through (the server's main loop) say nothing
    inclusive = Counter({f: n for f, n in inclusive.items() if n < ROOT_SHARE * total})
    ours = Counter({f: n for f, n in ours.items() if n < ROOT_SHARE * total})

    return {
        "samples": total,
        "self": top(own),
        "inclusive": top(inclusive),
        "inclusive_jobq": top(ours),
        "phases": [
            {"phase": name, "samples": n, "percent": round(100 * n / total, 1)}
            for name, n in phases.most_common()
        ],
        "self_by_package": [
            {"package": name, "samples": n, "percent": round(100 * n / total, 1)}
            for name, n in packages.most_common()
        ]
        if total
        else [],
    }
