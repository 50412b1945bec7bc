"""The README (and the docs it leads to) tell the truth.

Its first commands are the ones CI runs, the docs' configuration table matches `Settings`,
and its curl walkthrough is run, as written, against a real `jobq serve` process on
the test database; the facts it shows are then checked in its output and in the
database.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from app.core.config import Settings
from tests.conftest import ONCE_IN
from tests.helpers import free_port, listens

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CONFIGURATION = REPO / "docs" / "configuration.md"
CI_SCRIPT = REPO / ".ci" / "run"

WALKTHROUGH_MARKER = "<!-- walkthrough -->"
WALKTHROUGH_FIRST_LINE = "JOBQ=${JOBQ:-http://127.0.0.1:8000}"
START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 15.0
WALKTHROUGH_TIMEOUT_SECONDS = 60.0
TOKEN = re.compile(r"^[0-9]+-[0-9a-f]{32}$")


# ---- reading the README ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block: the line its opening fence is on, its info string, its text."""

    line: int
    info: str
    text: str


def _readme_lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def _blocks(lines: list[str]) -> list[Block]:
    """Every ``` fenced block, in order."""
    blocks: list[Block] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, line in enumerate(lines):
        if opened is None:
            if line.startswith("```"):
                opened, body = (number, line[3:].strip()), []
        elif line.strip() == "```":
            blocks.append(Block(opened[0], opened[1], "\n".join(body) + "\n"))
            opened = None
        else:
            body.append(line)
    assert opened is None, f"README.md: the fence opened on line {opened[0] + 1} is never closed"
    return blocks


def _walkthrough() -> str:
    """The ```bash block right after the `<!-- walkthrough -->` comment."""
    lines = _readme_lines()
    markers = [n for n, line in enumerate(lines) if line.strip() == WALKTHROUGH_MARKER]
    assert len(markers) == 1, f"README.md needs exactly one {WALKTHROUGH_MARKER} line"
    following = [b for b in _blocks(lines) if b.line > markers[0]]
    assert following, "no code block after the walkthrough marker"
    block = following[0]
    between = lines[markers[0] + 1 : block.line]
    assert all(not line.strip() for line in between), "the marker must sit right above the block"
    assert block.info == "bash", f"the walkthrough block must be ```bash, not ```{block.info}"
    return block.text


def _commands(block: Block) -> list[str]:
    """The shell commands in a block, comments and blank lines left out."""
    commands = (line.split("#", 1)[0].strip() for line in block.text.splitlines())
    return [command for command in commands if command]


def _default_cell(value: Any) -> str:
    """How the configuration table writes a default."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, tuple):  # a comma-separated list, as its variable is written
        return f"`{','.join(value)}`"
    return f"`{value}`"


# ---- the README's claims about itself and the repository -------------------------------


def test_readme_starts_with_make_run_and_make_test() -> None:
    lines = _readme_lines()
    assert lines[0].startswith("# "), "the README starts with its title"
    first = _blocks(lines)[0]
    intro = [line for line in lines[1 : first.line] if line.strip()]
    assert len(intro) == 1 and intro[0].endswith("."), (
        "between the title and the first commands: one line, a one-sentence description"
    )
    assert not intro[0].startswith("#")
    assert _commands(first) == ["make run", "make test"]

    ci = [line.strip() for line in CI_SCRIPT.read_text().splitlines()]
    runs = [line for line in ci if line and not line.startswith(("#", "echo"))]
    assert any(re.search(r"(^|\s)make test($|\s)", line) for line in runs), (
        ".ci/run must run the README's `make test`"
    )


def test_ci_runs_make_test_twice_with_ci_set() -> None:
    # With CI set, a test whose tool is missing (curl, jq, node) fails instead of skipping.
    lines = [line.strip() for line in CI_SCRIPT.read_text().splitlines()]
    commands = [not line.startswith(("#", "echo")) for line in lines]
    runs = [
        n
        for n, line in enumerate(lines)
        if commands[n] and re.search(r"(^|\s)make test(\s|$)", line)
    ]
    assert len(runs) == 2, ".ci/run runs `make test` once per database mode"
    modes = [lines[n].startswith("env -u JOBQ_DATABASE_URL ") for n in runs]
    assert sorted(modes) == [False, True], "one `make test` without JOBQ_DATABASE_URL"
    exports = [n for n, line in enumerate(lines) if line == "export CI=true"]
    assert exports and exports[0] < runs[0], ".ci/run must `export CI=true` before `make test`"
    # each run names itself: the tests marked `once` for it run there only
    named = [re.findall(rf"\b{ONCE_IN}=(\w+) ", lines[n]) for n in runs]
    expected = [["embedded"] if embedded else ["server"] for embedded in modes]
    assert named == expected, f"each `make test` with {ONCE_IN}=<its mode>"
    # lint and the docs' build are steps of their own, not tests
    for step in ("make lint", "make docs"):
        steps = [line for n, line in enumerate(lines) if commands[n] and step in line]
        assert steps, f".ci/run must run `{step}`"


def _collect(run: str | None, *files: str) -> subprocess.CompletedProcess[str]:
    """`pytest --collect-only -q FILES` with `JOBQ_TESTS_ONCE_IN=run` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != ONCE_IN}
    if run is not None:
        env[ONCE_IN] = run
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("run", [None, "server", "embedded"])
def test_the_tests_marked_once_run_in_the_run_they_name(run: str | None) -> None:
    # this of test_lock's is marked once("server"), this of test_bench's once("embedded"),
    # test_readme's not at all
    lock = "tests/unit/test_lock.py::test_this_environment_runs_the_locked_versions"
    bench = "tests/processes/test_bench.py::test_quick_benchmark_reports_every_section"
    collected = _collect(run, lock, "tests/processes/test_readme.py", bench)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert any(i.startswith("tests/processes/test_readme.py::") for i in ids), ids
    locked = [i for i in ids if i.startswith(lock)]
    assert len(locked) == (0 if run == "embedded" else 1), ids
    benched = [i for i in ids if i.startswith(bench)]
    assert len(benched) == (0 if run == "server" else 1), ids
    deselected = {None: None, "server": "1 deselected", "embedded": "1 deselected"}[run]
    if deselected:
        assert deselected in collected.stdout, collected.stdout
    else:
        assert "deselected" not in collected.stdout, collected.stdout


def test_a_run_named_wrong_is_refused() -> None:
    collected = _collect("both", "tests/unit/test_lock.py")
    assert collected.returncode != 0
    refused = f"{ONCE_IN} must be server or embedded, not 'both'"
    assert refused in collected.stdout + collected.stderr


def test_makefile_has_the_readme_targets() -> None:
    makefile = (REPO / "Makefile").read_text()
    for target in ("run", "test", "lint", "openapi"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"no `make {target}`"


def test_configuration_table_lists_every_setting_with_its_default() -> None:
    rows: dict[str, str] = {}
    for line in CONFIGURATION.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `(JOBQ_[A-Z_]+)` \| ([^|]+) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    expected = {
        f"JOBQ_{name.upper()}": _default_cell(field.default)
        for name, field in Settings.model_fields.items()
    }
    assert rows == expected


# ---- the walkthrough, against a real `jobq serve` --------------------------------------


@dataclass(frozen=True, slots=True)
class Service:
    url: str
    log: Path


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, and kill if it does not exit in time."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _wait_until_healthy(
    url: str, port: int, process: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    async with httpx.AsyncClient(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"jobq serve exited with {process.returncode}:\n{log.read_text()}")
            try:
                answer = await client.get(f"{url}/healthz")
                if answer.status_code == 200 and listens(process.pid, port):
                    return  # this process answered, not one that took its port
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    pytest.fail(
        f"jobq serve did not answer /healthz in {START_TIMEOUT_SECONDS} s:\n{log.read_text()}"
    )


@pytest.fixture
def shell_tools() -> None:
    """bash, curl and jq: the walkthrough's tools. Missing ones skip it, but fail it in CI."""
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    if missing:
        message = f"the README walkthrough needs {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
async def service(
    shell_tools: None, db: asyncpg.Connection, database_url: str, tmp_path: Path
) -> AsyncIterator[Service]:
    """`jobq serve` as its own process on the (emptied) test database."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "jobq-serve.log"
    # Only the test database: no JOBQ_* from the caller's shell changes the defaults shown.
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    env["JOBQ_DATABASE_URL"] = database_url
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        await _wait_until_healthy(url, port, process, log)
        yield Service(url, log)
    finally:
        _stop(process)


def _run_walkthrough(url: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    script = _walkthrough()
    assert script.splitlines()[0] == WALKTHROUGH_FIRST_LINE
    path = workdir / "walkthrough.sh"
    path.write_text(script, encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ")}
    env["JOBQ"] = url
    return subprocess.run(
        ["bash", "-euo", "pipefail", str(path)],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WALKTHROUGH_TIMEOUT_SECONDS,
        check=False,
    )


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    objects = []
    for line in stdout.splitlines():
        value = json.loads(line)  # every line the walkthrough prints is a JSON object
        assert isinstance(value, dict), line
        objects.append(value)
    return objects


def _only(objects: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [o for o in objects if key in o]


def _shaped(objects: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """The printed objects with exactly these keys: the lines one step's `jq` prints."""
    return [o for o in objects if set(o) == set(keys)]


async def test_the_curl_walkthrough_runs_a_job_through_its_life(
    service: Service, db: asyncpg.Connection, tmp_path: Path
) -> None:
    ran = await asyncio.to_thread(_run_walkthrough, service.url, tmp_path)
    report = (
        f"stdout:\n{ran.stdout}\nstderr:\n{ran.stderr}\nservice log:\n{service.log.read_text()}"
    )
    assert ran.returncode == 0, report
    assert ran.stderr == "", report
    printed = _json_lines(ran.stdout)
    assert printed[0] == {"status": "ok"}, report

    # Enqueue, the same call again (deduplicated, same id), then a batch of two.
    first, again, *batch = _only(printed, "deduplicated")
    ada = first["id"]
    assert (first["state"], first["attempt"], first["deduplicated"]) == ("queued", 0, False)
    assert (again["id"], again["deduplicated"]) == (ada, True), report
    assert [(b["state"], b["deduplicated"]) for b in batch] == [("queued", False)] * 2
    others = {b["id"] for b in batch}
    assert len(others) == 2 and ada not in others

    # worker-1 leased the job, heartbeat (the lease now ends 60 s later than it did, and
    # the progress was stored), completed it, and completed it again: the same answer.
    (held,) = _shaped(printed, "lease_id", "expires_at", "job", "state", "attempt")
    token = held["lease_id"]
    assert TOKEN.match(token) and token.startswith(f"{ada}-"), report
    assert (held["job"], held["state"], held["attempt"]) == (ada, "running", 1), report
    (beat,) = _shaped(printed, "lease_id", "expires_at", "cancel_requested", "progress_recorded")
    assert beat == {
        "lease_id": token,
        "expires_at": beat["expires_at"],
        "cancel_requested": False,
        "progress_recorded": True,
    }, report
    extended = datetime.fromisoformat(beat["expires_at"]) - datetime.fromisoformat(
        held["expires_at"]
    )
    assert timedelta(seconds=55) < extended < timedelta(seconds=65), report
    sent = {"message_id": "msg-1"}
    (completed_1,) = _shaped(printed, "id", "state", "result", "progress")
    assert completed_1 == {"id": ada, "state": "succeeded", "result": sent, "progress": 50}, report
    (repeated,) = _shaped(printed, "id", "state", "result")
    assert repeated == {"id": ada, "state": "succeeded", "result": sent}, report

    # worker-2 leased the other two at once, each on its first attempt.
    leased = _shaped(printed, "lease_id", "job", "attempt")
    assert sorted((item["job"], item["attempt"]) for item in leased) == sorted(
        (job_id, 1) for job_id in others
    ), report
    assert all(item["lease_id"].startswith(f"{item['job']}-") for item in leased), report

    # The failed attempt went back to the queue, to be retried after ~10 s.
    (retry,) = _only(printed, "retry_in_s")
    assert retry["id"] in others
    assert (retry["state"], retry["attempt"], retry["last_error"]) == ("queued", 1, "SMTPTimeout")
    assert 0 < retry["retry_in_s"] <= 12, report

    # The acks: the other job completed; worker-1's finished lease is fenced off.
    acked, stale = _only(printed, "code")
    assert (acked["status"], acked["code"], acked["state"]) == (200, None, "succeeded")
    assert acked["job_id"] == (others - {retry["id"]}).pop()
    assert (stale["status"], stale["code"]) == (409, "lease_lost")
    assert (stale["job_id"], stale["state"]) == (ada, "succeeded")

    # And the database agrees: three jobs, in the states the README shows.
    rows = await db.fetch(
        """
        SELECT id, state::text AS state, attempt, result, last_error,
               jobq.attempts_of(j) AS attempts,
               progress_percent, progress_stage, idempotency_key, run_at > now() AS later
          FROM jobq.jobs j ORDER BY id
        """
    )
    jobs = {row["id"]: row for row in rows}
    assert set(jobs) == {ada, *others}, "the deduplicated enqueue must not add a job"

    done = jobs[ada]
    assert (done["state"], done["attempt"], done["idempotency_key"]) == (
        "succeeded",
        1,
        "welcome-ada",
    )
    assert json.loads(done["result"]) == {"message_id": "msg-1"}
    assert (done["progress_percent"], done["progress_stage"]) == (50, "rendering")
    assert done["last_error"] is None, "the stale ack must not touch the job"
    assert [(a["worker_id"], a["outcome"]) for a in json.loads(done["attempts"])] == [
        ("worker-1", "succeeded")
    ]

    retried = jobs[retry["id"]]
    assert (retried["state"], retried["attempt"], retried["later"]) == ("queued", 1, True)
    assert json.loads(retried["last_error"]) == {
        "type": "SMTPTimeout",
        "message": "smtp.example.com timed out",
        "details": None,
    }
    assert [(a["worker_id"], a["outcome"]) for a in json.loads(retried["attempts"])] == [
        ("worker-2", "failed")
    ]

    completed = jobs[acked["job_id"]]
    assert completed["state"] == "succeeded"
    assert json.loads(completed["result"]) == {"message_id": "msg-3"}

    # The closing list shows the three jobs as they are.
    listed = [(o["id"], o["state"]) for o in printed[-3:] if "result" in o]
    assert listed == [(row["id"], row["state"]) for row in rows], report


def test_the_security_scope_table_is_the_routes_own() -> None:
    from tests.docs_tables import SECURITY, current, rewritten

    text = SECURITY.read_text(encoding="utf-8")
    assert current(text) == current(rewritten(text)), (
        "docs/security.md's scope table fell behind the routes: run `make docs-tables`"
    )
    assert "`PUT /v1/queues/{queue}/settings`" in current(text)
