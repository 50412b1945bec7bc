"""`jobq serve --workers N`: any process answers a scrape with the sum over all of them,
and they all log alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.helpers import answers, free_port
from tests.metrics_support import metrics_dirs, parse, value

# Processes running jobq's own logic, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("embedded")

REPO = Path(__file__).resolve().parents[2]


def test_workers_answer_scrapes_with_the_sum_and_log_alike(
    database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env |= {
        "JOBQ_DATABASE_URL": database_url,
        "JOBQ_MIGRATE_ON_START": "false",
        "TMPDIR": str(tmp_path),  # its metrics folder, apart from any other service's
    }
    service = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "2"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    q = f"w-{uuid.uuid4().hex[:8]}"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=1) as http:  # one: each new client reads the CA bundle
            while time.monotonic() < deadline:
                if answers(http, f"{base}/readyz", service.pid, port):
                    break
                time.sleep(0.2)
        assert len(metrics_dirs(tmp_path)) == 1  # the workers' shared metrics folder
        for _ in range(6):  # new connections: spread over the workers
            created = httpx.post(f"{base}/v1/queues/{q}/jobs", json={"type": "t"})
            assert created.status_code == 201
        for _ in range(8):
            families = parse(httpx.get(f"{base}/metrics").text)
            assert value(families, "jobq_jobs_enqueued_total", queue=q) == 6
    finally:
        service.send_signal(signal.SIGTERM)
        output, _ = service.communicate(timeout=60)
    assert service.returncode == 0, output
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    requests = [e for e in lines if e.get("event") == "request" and e["route"].endswith("/jobs")]
    assert len(requests) == 6, output
    assert all(e["status"] == 201 and len(e["request_id"]) == 32 for e in requests)
    assert any(e["message"] == "Application startup complete." for e in lines), output
    assert metrics_dirs(tmp_path) == set()  # the shared metrics folder went with the service
