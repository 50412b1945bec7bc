"""The fault-injection run, at CI size, as a real subprocess: `python -m tests.processes.chaos`.

It brings its own processes (three `jobq serve`, workers, producers) and, without
`JOBQ_DATABASE_URL`, its own embedded PostgreSQL; with it, it restarts that server (see
the harness's docstring). `JOBQ_CHAOS_JOBS=50000` runs the big version.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.processes.chaos import Script
from tests.processes.chaos.databases import stop_embedded
from tests.processes.chaos.evidence import parse_reaper_line
from tests.processes.chaos.options import CI_JOBS, REPO

JOBS = int(os.environ.get("JOBQ_CHAOS_JOBS", CI_JOBS))
TIMEOUT_SECONDS = 270 if JOBS <= CI_JOBS else 270 + JOBS // 50
INTERRUPT_GRACE_SECONDS = 20


def run_harness(tmp_path: Path) -> tuple[int, str, dict[str, Any] | None]:
    """Run it; on a timeout interrupt it (it cleans up), then kill what is left."""
    summary_path = tmp_path / "summary.json"
    run_dir = tmp_path / "run"
    harness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.processes.chaos",
            "--jobs",
            str(JOBS),
            "--run-dir",
            str(run_dir),
            "--json",
            str(summary_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its services and clients share its process group
    )
    try:
        output, _ = harness.communicate(timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        output = stop(harness, run_dir)
        pytest.fail(f"the harness took over {TIMEOUT_SECONDS}s:\n{output[-5000:]}")
    except BaseException:  # Ctrl-C, pytest-timeout: never leave the run behind
        stop(harness, run_dir)
        raise
    finally:
        # Whatever the harness left (it should leave nothing) shares its process group.
        stop_embedded(run_dir)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(harness.pid, signal.SIGKILL)
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return harness.returncode, output, summary


def stop(harness: subprocess.Popen[str], run_dir: Path) -> str:
    """SIGTERM (the harness tears its run down), then SIGKILL to its whole process group."""
    harness.send_signal(signal.SIGTERM)
    try:
        output, _ = harness.communicate(timeout=INTERRUPT_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(harness.pid, signal.SIGKILL)
        output, _ = harness.communicate()
    stop_embedded(run_dir)
    return output


@pytest.mark.timeout(TIMEOUT_SECONDS + INTERRUPT_GRACE_SECONDS + 30)
def test_every_invariant_holds_under_faults(tmp_path: Path) -> None:
    """The harness checks every invariant itself (its exit code); this is that run."""
    returncode, output, summary = run_harness(tmp_path)
    tail = output[-6000:]
    assert returncode == 0, tail
    assert summary is not None, tail
    assert summary["ok"] and summary["violations"] == [], tail
    assert summary["jobs"] == JOBS and summary["lost"] == 0
    assert summary["mode"] == ("external" if os.environ.get("JOBQ_DATABASE_URL") else "embedded")


def test_reaper_lines_are_parsed() -> None:
    line = (
        "2026-11-22 04:28:21,793 INFO jobq.reaper: reaped replica=host-1:4242"
        " batch_started=1795321701.788266 batch_ended=1795321701.793123"
        " requeued=2 failed=1 job_ids=7,72,3"
    )
    batch = parse_reaper_line(line, "service-1")
    assert batch is not None
    assert (batch.service, batch.replica) == ("service-1", "host-1:4242")
    assert (batch.started, batch.ended) == (1795321701.788266, 1795321701.793123)
    assert (batch.requeued, batch.failed, batch.job_ids) == (2, 1, [7, 72, 3])
    assert parse_reaper_line(line.replace("job_ids=7,72,3", "job_ids="), "") is not None
    assert parse_reaper_line("2026-11-22 04:28:21,793 WARNING jobq.reaper: reaper: x", "") is None
    assert parse_reaper_line('INFO uvicorn.access: "POST /v1/acks HTTP/1.1" 200', "") is None


def test_scripts_say_what_each_attempt_reports() -> None:
    flaky = Script("flaky", fail_times=2)
    assert [flaky.plan(n) for n in (1, 2, 3, 4)] == ["fail", "fail", "complete", "complete"]
    assert flaky.final_state == "succeeded"
    assert Script("fatal").plan(1) == "fatal" and Script("fatal").final_state == "failed"
    assert Script("ok").plan(1) == Script("slow", sleep=3).plan(5) == "complete"
    assert Script.from_payload(flaky.payload(9)) == flaky
    assert Script.for_index(7, 123) == Script.for_index(7, 123)  # every process agrees
