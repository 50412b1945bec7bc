"""The images' entrypoints and HEALTHCHECK run for real, without a Docker engine: `python -m
app` as the jobq image runs it, against the test database, and the example worker's
command against a real service."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db import migrate
from app.db.embedded import quote_ident
from app.db.url import async_url, with_database
from tests.container_files import (
    ENTRYPOINT,
    REPO,
    SDK_DIR,
    WORKER_DOCKERFILE,
    Stage,
    exec_form,
    healthcheck_argv,
    parse_dockerfile,
)
from tests.helpers import free_port
from tests.sdk_support import clean_env, eventually, start_service, stop_process

FRESH_DATABASE = "jobq_test_container"


SUBPROCESS_TIMEOUT_SECONDS = 60.0


SERVE_START_TIMEOUT_SECONDS = 30.0


def run_entrypoint(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m app ARGS` as the image runs it (sys.executable stands in for python)."""
    return subprocess.run(
        [sys.executable, *ENTRYPOINT[1:], *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    )


async def _execute_on_server(server_url: str, *statements: str) -> None:
    """Run statements on the server's `postgres` database, outside any transaction."""
    engine = create_async_engine(
        async_url(with_database(server_url, "postgres")),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
    )
    try:
        async with engine.connect() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def _recreate_empty(server_url: str) -> str:
    database = quote_ident(FRESH_DATABASE)
    await _execute_on_server(
        server_url,
        f"DROP DATABASE IF EXISTS {database} WITH (FORCE)",
        f"CREATE DATABASE {database}",
    )
    return with_database(server_url, FRESH_DATABASE)


async def _schema_state(url: str) -> tuple[str | None, bool]:
    """(Alembic revision or None, whether jobq.jobs exists)."""
    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            versioned = await conn.scalar(text("SELECT to_regclass('jobq.alembic_version')"))
            version = (
                await conn.scalar(text("SELECT version_num FROM jobq.alembic_version"))
                if versioned is not None
                else None
            )
            jobs = await conn.scalar(text("SELECT to_regclass('jobq.jobs')"))
    finally:
        await engine.dispose()
    return version, jobs is not None


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A database of this module's own, recreated with no schema: what `migrate` meets first."""
    url = asyncio.run(_recreate_empty(server_url))
    yield url
    asyncio.run(
        _execute_on_server(
            server_url, f"DROP DATABASE IF EXISTS {quote_ident(FRESH_DATABASE)} WITH (FORCE)"
        )
    )


def run_healthcheck(argv: list[str], port: int) -> int:
    assert argv[0] == "python"
    return subprocess.run(
        [sys.executable, *argv[1:]],
        env={**os.environ, "JOBQ_PORT": str(port)},
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    ).returncode


@pytest.mark.once("server")
def test_entrypoint_help_lists_the_subcommands() -> None:
    result = run_entrypoint("--help")
    assert result.returncode == 0, result.stderr
    for command in ("serve", "migrate", "openapi"):
        assert command in result.stdout


@pytest.mark.once("server")
def test_entrypoint_writes_the_openapi_document_to_stdout() -> None:
    result = run_entrypoint("openapi", "-o", "-")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert "paths" in document
    assert "/healthz" in document["paths"]


def test_entrypoint_migrate_on_a_migrated_database(database_url: str) -> None:
    result = run_entrypoint("migrate", env={"JOBQ_DATABASE_URL": database_url})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "schema is up to date" in output


def test_entrypoint_migrate_creates_the_schema_on_an_empty_database(
    empty_database_url: str,
) -> None:
    assert asyncio.run(_schema_state(empty_database_url)) == (None, False)
    result = run_entrypoint("migrate", env={"JOBQ_DATABASE_URL": empty_database_url})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "schema is up to date" in output
    head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert asyncio.run(_schema_state(empty_database_url)) == (head, True)


def test_alembic_typed_by_hand_goes_where_it_is_told(empty_database_url: str) -> None:
    """`alembic upgrade head` and `alembic downgrade -1` from the checkout: each reaches its
    own target and ends cleanly, also when there is nothing to do."""

    def alembic(*args: str) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "alembic", *args],
            cwd=REPO,
            env={**os.environ, "JOBQ_DATABASE_URL": empty_database_url},
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT_SECONDS,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "Traceback" not in output

    script = ScriptDirectory.from_config(migrate.alembic_config())
    head = script.get_current_head()
    assert head is not None
    previous = script.get_revision(head).down_revision
    alembic("upgrade", "head")
    assert asyncio.run(_schema_state(empty_database_url)) == (head, True)
    alembic("upgrade", "head")  # already there
    assert asyncio.run(_schema_state(empty_database_url)) == (head, True)
    alembic("downgrade", "-1")
    assert asyncio.run(_schema_state(empty_database_url)) == (previous, True)
    alembic("upgrade", "head")
    assert asyncio.run(_schema_state(empty_database_url)) == (head, True)


def test_serve_passes_the_image_healthcheck_and_stops_cleanly_on_sigterm(
    final: Stage, empty_database_url: str
) -> None:
    """What `docker run` then `docker stop` does: serve, get healthy, SIGTERM, exit 0."""
    probe = healthcheck_argv(final)
    port = free_port()
    assert run_healthcheck(probe, port) != 0, "the probe passes with nothing listening"
    server = subprocess.Popen(
        [sys.executable, *ENTRYPOINT[1:], *exec_form(final.last("CMD"))],
        cwd=REPO,
        env={
            **os.environ,
            "JOBQ_DATABASE_URL": empty_database_url,
            "JOBQ_HOST": "127.0.0.1",
            "JOBQ_PORT": str(port),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + SERVE_START_TIMEOUT_SECONDS
        while run_healthcheck(probe, port) != 0:
            assert server.poll() is None, "serve exited before it got healthy"
            assert time.monotonic() < deadline, "serve never got healthy"
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=SUBPROCESS_TIMEOUT_SECONDS)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, output
    assert "schema is up to date" in output


async def test_worker_image_command_runs_jobs_and_stops_on_sigterm(
    database_url: str, db: Any, tmp_path: Path
) -> None:
    """What `docker compose up worker` runs, run directly against a real service."""
    stages = parse_dockerfile(WORKER_DOCKERFILE.read_text())
    argv = exec_form(stages[-1].last("ENTRYPOINT")) + exec_form(stages[-1].last("CMD"))
    service = await asyncio.to_thread(start_service, database_url, tmp_path / "serve.log")
    log = tmp_path / "worker.log"
    try:
        async with httpx.AsyncClient(base_url=service.url) as http:
            created = await http.post(
                "/v1/queues/images/jobs",
                json={"type": "resize", "payload": {"width": 1920, "height": 1080}},
            )
            assert created.status_code == 201, created.text
            with log.open("wb") as output:
                worker = subprocess.Popen(
                    [sys.executable, *argv[1:]],
                    cwd=SDK_DIR,
                    env=clean_env(JOBQ_URL=service.url),
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            try:

                async def finished() -> dict[str, Any] | None:
                    job: dict[str, Any] = (
                        await http.get(f"/v1/jobs/{created.json()['id']}")
                    ).json()
                    return job if job["state"] == "succeeded" else None

                job = await eventually(finished, timeout=30)
            finally:
                code = await asyncio.to_thread(stop_process, worker)
    finally:
        await asyncio.to_thread(stop_process, service.process)
    assert job["result"] == {"width": 640, "height": 360}
    assert job["progress"]["stage"] == "upload"
    assert code == 0, log.read_text()
