"""The TypeScript package in clients/typescript (a client generated from the committed
OpenAPI document with the producer's calls, and a Worker) runs real jobs against a real
`jobq serve`; `npm install` of its folder, as in a fresh clone, builds it and imports;
its README's examples typecheck; `npm pack` makes a package with its build and type
declarations.

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
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.helpers import exclusive
from tests.sdk_support import REPO, Service, clean_env, running_service

CLIENT = REPO / "clients" / "typescript"
LOCK = CLIENT / "package-lock.json"
STAMP = CLIENT / "node_modules" / ".jobq-installed-lock"
GENERATED = CLIENT / "src" / "schema.d.ts"
NPM_TIMEOUT_SECONDS = 300
WORKER_TIMEOUT_SECONDS = 120


def _run(*command: str, timeout: float, env: dict[str, str] | None = None) -> str:
    try:
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
    except subprocess.TimeoutExpired as exc:  # what it printed so far says where it hung
        # (bytes, whatever `text` says: what the process wrote before it was stopped)
        printed = b"".join(o for o in (exc.stdout, exc.stderr) if isinstance(o, bytes))
        said = printed.decode(errors="replace")
        pytest.fail(f"$ {' '.join(command)}: not done in {timeout:.0f} s\n{said}")
    output = f"$ {' '.join(command)}\n{result.stdout}{result.stderr}"
    assert result.returncode == 0, output
    return output


@pytest.fixture(scope="module", autouse=True)
def alone() -> Iterator[None]:
    """The client's directory to this module alone while it installs, builds and packs."""
    with exclusive(CLIENT):
        yield


@pytest.fixture(scope="module")
def node_modules(alone: None) -> None:
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
    # --ignore-scripts: not the prepare script's build; the tests build when they need to
    _run(
        "npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts",
        "--cache", str(CLIENT / ".npm-cache"),
        timeout=NPM_TIMEOUT_SECONDS,
    )  # fmt: skip
    STAMP.write_text(lock)


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    # loopback allowed: client.test.ts has the service push a job to an endpoint of its own
    yield from running_service(
        database_url,
        tmp_path_factory.mktemp("ts") / "serve.log",
        JOBQ_PUSH_ALLOWED_TARGETS="http://127.0.0.1:*",
        JOBQ_WORKER_FLUSH_SECONDS="0.2",  # worker.test.ts lists a worker soon after it starts
    )


@pytest.fixture
async def http(service: Service, db: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as client:
        yield client


@pytest.mark.once("server")
def test_generated_types_match_the_committed_spec(node_modules: None, tmp_path: Path) -> None:
    fresh = tmp_path / "schema.d.ts"
    _run(
        "node", "node_modules/.bin/openapi-typescript", "../../openapi/openapi.json",
        "--default-non-nullable", "false", "--output", str(fresh),
        timeout=NPM_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert fresh.read_text() == GENERATED.read_text(), (
        "clients/typescript/src/schema.d.ts is stale: run `npm run generate` in clients/typescript"
    )


@pytest.mark.once("server")  # the package's logic: no database mode changes it
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


@pytest.mark.once("server")  # the package's logic: no database mode changes it
@pytest.mark.timeout(NPM_TIMEOUT_SECONDS + WORKER_TIMEOUT_SECONDS)
def test_the_package_passes_its_own_tests_against_the_service(
    node_modules: None, service: Service
) -> None:
    """Node's test runner on src/test: the producer's calls (keys of their own, retries
    that make no second job, wait, the event stream resumed), and the worker's
    concurrency, progress, heartbeats past a lease, cancellation, Permanent and Retry,
    timeouts, snoozes, stopping, presence and quiet; a pushed queue's job verified by
    `verifyDelivery` at an endpoint in Node (signed by the service, in Python), its
    health and reset; `verifyDelivery` against requests signed with the
    `standardwebhooks` library; and the audit log's pages."""
    _run("npm", "run", "--silent", "build", timeout=NPM_TIMEOUT_SECONDS)
    output = _run(
        "node", "--test", "dist/test/",
        timeout=WORKER_TIMEOUT_SECONDS, env=clean_env(JOBQ_URL=service.url),
    )  # fmt: skip
    assert "# pass 24" in output and "# fail 0" in output, output


@pytest.mark.once("server")
@pytest.mark.timeout(2 * NPM_TIMEOUT_SECONDS)
def test_the_readme_examples_typecheck(node_modules: None) -> None:
    """Each ```ts block of the README, compiled against the package as users import it."""
    _run("npm", "run", "--silent", "build", timeout=NPM_TIMEOUT_SECONDS)
    blocks = re.findall(r"```ts\n(.*?)```", (CLIENT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    check = CLIENT / ".readme-check"
    shutil.rmtree(check, ignore_errors=True)
    check.mkdir()
    try:
        for number, block in enumerate(blocks):
            (check / f"example-{number}.ts").write_text(block)
        config = {"extends": "../tsconfig.json", "compilerOptions": {"noEmit": True,
                  "rootDir": "."}, "include": ["*.ts"]}  # fmt: skip
        (check / "tsconfig.json").write_text(json.dumps(config))
        _run("node", "node_modules/.bin/tsc", "-p", ".readme-check", timeout=NPM_TIMEOUT_SECONDS)
        # a wrong field is caught: the check can fail
        (check / "wrong.ts").write_text(
            'import { createJobq } from "jobq-client";\n'
            'await createJobq().POST("/v1/queues/{queue}/jobs", '
            '{ params: { path: { queue: "q" } }, body: { typ: "x" } });\n'
        )
        wrong = subprocess.run(
            ["node", "node_modules/.bin/tsc", "-p", ".readme-check"],
            cwd=CLIENT, capture_output=True, text=True, timeout=NPM_TIMEOUT_SECONDS,
            check=False,
        )  # fmt: skip
        assert wrong.returncode != 0 and "wrong.ts" in wrong.stdout, wrong.stdout
    finally:
        shutil.rmtree(check, ignore_errors=True)


@pytest.mark.once("server")
@pytest.mark.timeout(2 * NPM_TIMEOUT_SECONDS)
def test_npm_pack_ships_the_build_and_its_types(node_modules: None) -> None:
    """`npm pack` builds first (the prepare script), then ships dist/ and no sources."""
    shutil.rmtree(CLIENT / "dist", ignore_errors=True)
    packed = subprocess.run(
        ["npm", "pack", "--dry-run", "--json"], cwd=CLIENT, env=clean_env(),
        capture_output=True, text=True, timeout=NPM_TIMEOUT_SECONDS, check=False,
    )  # fmt: skip
    assert packed.returncode == 0, packed.stderr
    listing = json.loads(packed.stdout)
    files = {entry["path"] for entry in listing[0]["files"]}
    shipped = {"index", "events", "push"}  # every module index.js imports, with its types
    assert {f"dist/{name}.{ext}" for name in shipped for ext in ("js", "d.ts")} <= files
    assert {"dist/schema.d.ts", "README.md"} <= files
    # index.js imports tracing.js (its types are none of the API's); the traced worker
    # is the tests'
    assert "dist/tracing.js" in files and "dist/traced-worker.js" not in files
    assert listing[0]["name"] == "jobq-client"
    assert not any(path.startswith(("src/", "dist/test/")) for path in files)


@pytest.mark.once("embedded")
@pytest.mark.timeout(3 * NPM_TIMEOUT_SECONDS)
def test_npm_install_of_the_folder_builds_it_as_in_a_fresh_clone(
    node_modules: None, service: Service, tmp_path: Path
) -> None:
    """The README's `npm install <clients/typescript>` from a project, the folder as git
    has it (no node_modules, no dist/): the package imports and enqueues."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "."],
        cwd=CLIENT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    package = tmp_path / "jobq" / "clients" / "typescript"
    for name in filter(None, tracked):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CLIENT / name, package / name)
    assert not (package / "dist").exists() and not (package / "node_modules").exists()
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "p", "type": "module"}))
    (project / "main.js").write_text(
        'import { createJobq } from "jobq-client";\n'
        "const jobq = createJobq();\n"
        'const { id } = await jobq.enqueue("fresh", "hello", { from: "a fresh clone" });\n'
        "console.log(JSON.stringify(await jobq.wait(id, 0.1)));\n"
    )
    npm_env = clean_env(
        npm_config_cache=str(CLIENT / ".npm-cache"), npm_config_prefer_offline="true"
    )
    install = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", str(package)],
        cwd=project, env=npm_env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=2 * NPM_TIMEOUT_SECONDS, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    ran = subprocess.run(
        ["node", "main.js"], cwd=project, env=clean_env(JOBQ_URL=service.url),
        capture_output=True, text=True, timeout=WORKER_TIMEOUT_SECONDS, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    job = json.loads(ran.stdout)
    assert (job["queue"], job["state"], job["payload"]) == (
        "fresh", "queued", {"from": "a fresh clone"},
    )  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{32}", job["idempotency_key"])
