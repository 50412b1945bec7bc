"""The Node worker in clients/typescript, on a client generated from the committed
OpenAPI document, runs real jobs against a real `jobq serve`.

Jobs are enqueued with plain HTTP (what curl would send); the worker leases them,
reports progress in a heartbeat and completes or fails each; the outcome is read back
through the API. The generated types must match openapi/openapi.json.

Needs `node` and `npm` (on every development machine and in CI). Without them the
test is skipped, except in CI where it fails. `npm ci` keeps its cache in
clients/typescript/.npm-cache and is skipped while node_modules matches the lock file.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.sdk_support import REPO, Service, clean_env, running_service

CLIENT = REPO / "clients" / "typescript"
LOCK = CLIENT / "package-lock.json"
STAMP = CLIENT / "node_modules" / ".jobq-installed-lock"
GENERATED = CLIENT / "src" / "schema.d.ts"
NPM_TIMEOUT_SECONDS = 300
WORKER_TIMEOUT_SECONDS = 120


def _run(*command: str, timeout: float, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        list(command),
        cwd=CLIENT,
        env=env or clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = f"$ {' '.join(command)}\n{result.stdout}{result.stderr}"
    assert result.returncode == 0, output
    return output


@pytest.fixture(scope="module")
def node_modules() -> None:
    """`npm ci`, unless node_modules was installed from this very lock file."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        message = f"the TypeScript client needs {' and '.join(missing)} on PATH"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    lock = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == lock:
        return
    _run(
        "npm", "ci", "--prefer-offline", "--no-audit", "--no-fund",
        "--cache", str(CLIENT / ".npm-cache"),
        timeout=NPM_TIMEOUT_SECONDS,
    )  # fmt: skip
    STAMP.write_text(lock)


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from running_service(database_url, tmp_path_factory.mktemp("ts") / "serve.log")


@pytest.fixture
async def http(service: Service, db: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as client:
        yield client


def test_generated_types_match_the_committed_spec(node_modules: None, tmp_path: Path) -> None:
    fresh = tmp_path / "schema.d.ts"
    _run(
        "node", "node_modules/.bin/openapi-typescript", "../../openapi/openapi.json",
        "--output", str(fresh),
        timeout=NPM_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert fresh.read_text() == GENERATED.read_text(), (
        "clients/typescript/src/schema.d.ts is stale: run `npm run generate` in clients/typescript"
    )


async def test_the_node_worker_leases_heartbeats_and_finishes_jobs(
    node_modules: None, service: Service, http: httpx.AsyncClient
) -> None:
    enqueued = {}
    for job_type, payload in (
        ("add", {"a": 2, "b": 40}),
        ("shout", {"text": "hello from python"}),
        ("divide", {"a": 1, "b": 0}),
    ):
        response = await http.post(
            "/v1/queues/node/jobs",
            json={"type": job_type, "payload": payload, "max_attempts": 3},
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 201, response.text
        enqueued[job_type] = response.json()["id"]

    env = clean_env(
        JOBQ_URL=service.url, JOBQ_QUEUES="node", JOBQ_MAX_JOBS="3", JOBQ_WORKER_ID="node-test"
    )
    output = await asyncio.to_thread(
        _run, "npm", "start", "--silent", timeout=WORKER_TIMEOUT_SECONDS, env=env
    )

    jobs = {
        kind: (await http.get(f"/v1/jobs/{job_id}")).json() for kind, job_id in enqueued.items()
    }
    added, shouted, divided = jobs["add"], jobs["shout"], jobs["divide"]
    assert (added["state"], added["result"], added["attempt"]) == ("succeeded", {"sum": 42}, 1), (
        output
    )
    assert added["progress"]["percent"] == 50 and added["progress"]["stage"] == "adding"
    assert [a["worker_id"] for a in added["attempts"]] == ["node-test"]
    assert (shouted["state"], shouted["result"]) == ("succeeded", {"text": "HELLO FROM PYTHON"})
    assert shouted["progress"]["stage"] == "shouting"
    # A Permanent error is not retried, though attempts are left.
    assert (divided["state"], divided["attempt"]) == ("failed", 1), output
    assert divided["last_error"]["type"] == "Permanent"
    assert divided["last_error"]["message"] == "cannot divide 1 by zero"
    assert "stopped after 3 jobs" in output
