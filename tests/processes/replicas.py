"""`jobq serve` processes on the tests' database, for tests of several replicas at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers import answers, free_port

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30


class Replica:
    """One `jobq serve` process on the tests' database (its output in `log`), ready."""

    def __init__(self, database_url: str, log: Path, **env: str) -> None:
        self.log = log
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {
            **os.environ,
            "JOBQ_DATABASE_URL": database_url,
            **env,
        }
        port = self.url.rsplit(":", 1)[1]
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--port", port],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with httpx.Client(timeout=1) as http:  # one: each new client reads the CA bundle
            while time.monotonic() < deadline:
                assert self.process.poll() is None, log.read_text()
                if answers(http, f"{self.url}/readyz", self.process.pid, int(port)):
                    return
                time.sleep(0.1)
        raise AssertionError("jobq serve did not start")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM, and the exit it must lead to; one that hangs is killed (never left
        running after its test) and reported with its log, and so is a shutdown step
        that had to be left behind (jobq serve logs it and exits anyway)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            tail = self.log.read_text()[-4000:]
            raise AssertionError(f"jobq serve ignored SIGTERM; its log ends:\n{tail}") from None
        output = self.log.read_text()
        if "; left behind" in output:  # app.core.shutdown's message, in either log format
            raise AssertionError(f"a shutdown step hung; the log ends:\n{output[-4000:]}")


def stop_all(replicas: list[Replica]) -> None:
    """Stop every replica, even when one hangs (the first such failure is raised after)."""
    failures: list[AssertionError] = []
    for replica in replicas:
        try:
            replica.stop()
        except AssertionError as failure:
            failures.append(failure)
    if failures:
        raise failures[0]
