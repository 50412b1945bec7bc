"""`jobq serve` as a real process on the embedded database: durable, and stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from app.db.url import with_database
from tests.helpers import answers, free_port

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30
PORT_ATTEMPTS = 3


def _postgres_running(pgdata: Path) -> bool:
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata) in " ".join(proc.info["cmdline"] or []):
            return True
    return False


class Service:
    """One `jobq serve` process on an embedded database in `data_dir`."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "JOBQ_DATABASE_URL"}
        env["JOBQ_DATA_DIR"] = str(data_dir)
        for _ in range(PORT_ATTEMPTS):
            if self._start(env, args):
                return
        raise AssertionError(f"jobq serve found no free port in {PORT_ATTEMPTS} attempts")

    def _start(self, env: dict[str, str], args: tuple[str, ...]) -> bool:
        """Start on a fresh port; False if another process took the port first."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(self.port), *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with httpx.Client(timeout=1) as http:  # one: each new client reads the CA bundle
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    log = self.stop()
                    if "address already in use" in log:
                        return False
                    raise AssertionError(f"jobq serve exited:\n{log}")
                if answers(http, f"{self.url}/healthz", self.process.pid, self.port):
                    return True
                time.sleep(0.2)
        raise AssertionError(f"jobq serve did not start:\n{self.stop()}")

    def stop(self, sig: int = signal.SIGTERM) -> str:
        """Send `sig`, wait for the exit (kill after a timeout); returns the log."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            output, _ = self.process.communicate(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate()
        return output


# The tests on a data_dir start an embedded server of their own whatever the run's
# database mode: the embedded run has them (tests/conftest.py).
EMBEDDED_RUN = pytest.mark.once("embedded")


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    yield path
    if _postgres_running(path / "pgdata"):  # never leave a server behind, even on failure
        subprocess.run(["pkill", "-f", str(path / "pgdata")], check=False)


@EMBEDDED_RUN
def test_jobs_survive_a_restart_and_sigterm_stops_everything(data_dir: Path) -> None:
    first = Service(data_dir)
    try:
        created = httpx.post(f"{first.url}/v1/queues/q/jobs", json={"type": "t", "payload": 1})
        assert created.status_code == 201
        job_id = created.json()["id"]
    finally:
        log = first.stop(signal.SIGTERM)
    assert first.process.returncode == 0, log
    assert "Application shutdown complete" in log
    assert not _postgres_running(data_dir / "pgdata"), "the embedded server was left running"

    second = Service(data_dir)
    try:
        found = httpx.get(f"{second.url}/v1/jobs/{job_id}")
        assert found.status_code == 200, found.text  # say what came back instead, if not
        job = found.json()
        assert (job["id"], job["payload"], job["state"]) == (job_id, 1, "queued")
    finally:
        log = second.stop(signal.SIGINT)
    assert second.process.returncode == 0, log
    assert not _postgres_running(data_dir / "pgdata")
    handles = json.loads((data_dir / "pgdata" / ".handle_pids.json").read_text())
    assert handles == []


@EMBEDDED_RUN
def test_a_killed_service_does_not_pin_the_embedded_server(data_dir: Path) -> None:
    killed = Service(data_dir)
    killed.stop(signal.SIGKILL)
    assert _postgres_running(data_dir / "pgdata")  # nobody stopped it
    survivor = Service(data_dir)
    assert survivor.stop(signal.SIGTERM) and survivor.process.returncode == 0
    assert not _postgres_running(data_dir / "pgdata")


@EMBEDDED_RUN
def test_shutdown_releases_a_long_polling_lease_at_once(data_dir: Path) -> None:
    service = Service(data_dir)
    answers: list[httpx.Response] = []
    body = {"queues": ["idle"], "worker_id": "w", "wait_seconds": 30}
    waiting = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{service.url}/v1/leases", json=body, timeout=60))
    )
    waiting.start()
    time.sleep(1.0)  # the lease is now waiting for work
    started = time.monotonic()
    log = service.stop(signal.SIGTERM)
    waiting.join(10)
    assert service.process.returncode == 0, log
    assert time.monotonic() - started < 10, "shutdown waited for the long poll"
    assert answers and answers[0].status_code == 200 and answers[0].json() == {"leases": []}


def _read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Everything the server sends until it closes the connection: status, headers, body."""
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, body


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@EMBEDDED_RUN
def test_sigterm_finishes_a_request_in_flight_and_accepts_no_new_connection(
    data_dir: Path,
) -> None:
    service = Service(data_dir)
    body = json.dumps({"type": "t", "payload": "sent around a SIGTERM"}).encode()
    head = (
        f"POST /v1/queues/q/jobs HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        with socket.create_connection(("127.0.0.1", service.port), timeout=10) as conn:
            conn.sendall(head + body[: len(body) // 2])
            time.sleep(0.5)  # the server has the headers: a request is in flight
            service.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not _refused(service.port) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _refused(service.port), "still accepting connections after SIGTERM"
            time.sleep(0.5)
            assert service.process.poll() is None, "it did not wait for the request in flight"
            conn.sendall(body[len(body) // 2 :])
            status, headers, answer = _read_response(conn)  # and then it closes
    finally:
        log = service.stop(signal.SIGTERM)
    assert status == 201, answer
    assert headers["connection"] == "close"  # no further request on this connection
    assert service.process.returncode == 0, log
    job_id = json.loads(answer)["id"]

    again = Service(data_dir)
    try:
        job = httpx.get(f"{again.url}/v1/jobs/{job_id}").json()
        assert (job["payload"], job["state"]) == ("sent around a SIGTERM", "queued")
    finally:
        again.stop(signal.SIGTERM)


@EMBEDDED_RUN
def test_several_worker_processes_share_the_port(data_dir: Path) -> None:
    service = Service(data_dir, "--workers", "2")
    try:
        workers = psutil.Process(service.process.pid).children()
        serving = [p for p in workers if "spawn_main" in " ".join(p.cmdline())]
        assert len(serving) == 2, [p.cmdline() for p in workers]
        ids = [
            httpx.post(f"{service.url}/v1/queues/q/jobs", json={"type": "t"}).json()["id"]
            for _ in range(10)
        ]
        assert len(set(ids)) == 10
    finally:
        log = service.stop(signal.SIGTERM)
    assert service.process.returncode == 0, log
    assert not any(p.is_running() for p in serving)
    assert not _postgres_running(data_dir / "pgdata")


def _serve_output(database_url: str, *args: str) -> tuple[int, list[str]]:
    """`jobq serve` (or another command) on `database_url`: its exit status and lines."""
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "app", *(args or ("serve", "--port", str(free_port())))],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_SECONDS,
    )
    return done.returncode, (done.stdout + done.stderr).splitlines()


@pytest.mark.parametrize("args", [(), ("migrate",), ("keys", "list")])
def test_an_unreachable_database_is_one_line_naming_it_and_what_to_check(
    args: tuple[str, ...],
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/x"  # nothing listens there
    status, lines = _serve_output(url, *args)
    assert status != 0
    assert len(lines) == 1, "\n".join(lines)
    assert "Connect call failed" in lines[0]
    assert url in lines[0] and "JOBQ_DATABASE_URL" in lines[0]


@pytest.mark.parametrize("migrate", ["true", "false"])
def test_a_missing_database_is_one_line_with_the_servers_reason(
    server_url: str, migrate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBQ_MIGRATE_ON_START", migrate)
    missing = with_database(server_url, "jobq_no_such_database")
    status, lines = _serve_output(missing)
    assert status != 0
    assert len(lines) == 1, "\n".join(lines)
    assert 'database "jobq_no_such_database" does not exist' in lines[0]
