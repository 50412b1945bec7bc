"""`jobq keys create|list|revoke` on the test database, and what `jobq serve` does about
authentication and TLS."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from typer.testing import CliRunner, Result

from app.cli import cli
from app.core.config import get_settings
from tests.conftest import plain
from tests.helpers import assert_problem, free_port

REPO = Path(__file__).resolve().parents[2]
KEY = re.compile(r"^jobq_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$")
START_TIMEOUT_SECONDS = 30


@pytest.fixture(autouse=True)
def cli_database(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI pointed at the test database, with no key before and after."""
    monkeypatch.setenv("JOBQ_DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "200")  # rich's tables, unwrapped
    get_settings.cache_clear()

    async def truncate() -> None:
        conn = await asyncpg.connect(plain(database_url))
        try:
            await conn.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")
        finally:
            await conn.close()

    asyncio.run(truncate())
    yield
    asyncio.run(truncate())
    get_settings.cache_clear()


def jobq(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_create_prints_the_key_alone_then_list_and_revoke_show_it() -> None:
    created = jobq(
        "keys", "create", "--name", "ingest", "--scopes", "enqueue", "--queues", "emails,reports.*"
    )
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    assert KEY.match(key), created.stdout  # stdout holds the key only: KEY=$(jobq keys create …)
    assert "not shown again" in created.stderr
    lookup_id, _, secret = key.removeprefix("jobq_").partition("_")

    listed = jobq("keys", "list")
    assert listed.exit_code == 0, listed.output
    (row,) = [line for line in listed.stdout.splitlines() if "ingest" in line]
    cells = [cell for cell in re.split(r"\s{2,}", row.strip()) if cell]
    assert cells[:4] == ["ingest", f"jobq_{lookup_id}", "enqueue", "emails,reports.*"]
    assert cells[-1] == "-"  # not revoked
    assert secret not in listed.output

    revoked = jobq("keys", "revoke", "ingest")
    assert revoked.exit_code == 0, revoked.output
    (row,) = [line for line in jobq("keys", "list").stdout.splitlines() if "ingest" in line]
    assert row.split()[-1] != "-"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "dup", "--scopes", "read"], "already exists"),
        (
            ["--name", "x", "--scopes", "superuser"],
            "should be 'enqueue', 'work', 'read' or 'admin'",
        ),
        (["--name", "x", "--scopes", "admin", "--queues", "emails"], "admin keys cannot"),
        (["--name", "x", "--scopes", "read", "--queues", "no spaces"], "queue names or patterns"),
        (["--name", "bad name", "--scopes", "read"], "letters, digits"),
    ],
)
def test_create_refuses_what_the_api_refuses(args: list[str], message: str) -> None:
    assert jobq("keys", "create", "--name", "dup", "--scopes", "read").exit_code == 0
    result = jobq("keys", "create", *args)
    assert result.exit_code == 1
    assert message in result.stderr


def test_revoking_an_unknown_key_fails() -> None:
    result = jobq("keys", "revoke", "nobody")
    assert result.exit_code == 1
    assert "no API key is named 'nobody'" in result.stderr


async def test_a_key_from_the_cli_works_until_the_cli_revokes_it(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    created = await asyncio.to_thread(
        jobq, "keys", "create", "--name", "ingest", "--scopes", "enqueue", "--queues", "emails"
    )
    key = created.stdout.strip()
    app = app_factory()
    client: httpx.AsyncClient = await client_factory(app)
    while not app.state.services.auth.listening:
        await asyncio.sleep(0.02)
    headers = {"Authorization": f"Bearer {key}"}
    assert_problem(
        await client.post("/v1/queues/emails/jobs", json={"type": "t"}), 401, "unauthorized"
    )
    ok = await client.post("/v1/queues/emails/jobs", json={"type": "t"}, headers=headers)
    assert ok.status_code == 201, ok.text
    other = await client.post("/v1/queues/other/jobs", json={"type": "t"}, headers=headers)
    assert_problem(other, 403, "forbidden")
    assert_problem(await client.get("/v1/jobs", headers=headers), 403, "forbidden")  # no read
    assert (await asyncio.to_thread(jobq, "keys", "revoke", "ingest")).exit_code == 0
    started = time.monotonic()
    while (
        await client.post("/v1/queues/emails/jobs", json={"type": "t"}, headers=headers)
    ).status_code != 401:
        assert time.monotonic() - started < 1.0, "the revoked key still works"
        await asyncio.sleep(0.01)


# ---- jobq serve ------------------------------------------------------------------------


class Served(Exception):
    """Raised instead of serving: `jobq serve` got as far as starting uvicorn."""


@pytest.fixture
def no_serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(self: uvicorn.Server, *args: Any, **kwargs: Any) -> None:
        raise Served(self.config.host)

    monkeypatch.setattr(uvicorn.Server, "run", refuse)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in handlers.items():  # `serve` installs its own
        signal.signal(sig, handler)


def test_serve_refuses_an_open_network_address_without_a_key(
    no_serving: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="jobq")
    result = jobq("serve", "--host", "0.0.0.0")
    assert result.exit_code == 1, result.output
    assert any("no API key exists" in r.getMessage() for r in caplog.records)


def test_serve_starts_beyond_loopback_with_a_key_or_with_auth_disabled(
    no_serving: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = jobq("serve", "--host", "0.0.0.0")
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1
    monkeypatch.setenv("JOBQ_AUTH", "disabled")
    get_settings.cache_clear()
    result = jobq("serve", "--host", "0.0.0.0")
    assert isinstance(result.exception, Served), result.output
    monkeypatch.delenv("JOBQ_AUTH")
    get_settings.cache_clear()
    assert jobq("keys", "create", "--name", "admin", "--scopes", "admin").exit_code == 0
    result = jobq("serve", "--host", "0.0.0.0")
    assert isinstance(result.exception, Served), result.output
    result = jobq("serve", "--host", "127.0.0.1")
    assert isinstance(result.exception, Served), result.output


def test_serve_needs_a_certificate_with_a_private_key(no_serving: None, tmp_path: Path) -> None:
    result = jobq("serve", "--ssl-keyfile", str(tmp_path / "key.pem"))
    assert result.exit_code == 2
    assert "--ssl-certfile" in result.output


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "the TLS test needs the openssl command"
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return key, cert


async def test_serve_speaks_tls_with_a_certificate(
    certificate: tuple[Path, Path], database_url: str, tmp_path: Path
) -> None:
    key, cert = certificate
    port = free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("JOBQ_")}
    env["JOBQ_DATABASE_URL"] = database_url
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port),
             "--ssl-keyfile", str(key), "--ssl-certfile", str(cert)],
            cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    context = ssl.create_default_context(cafile=str(cert))
    try:
        async with httpx.AsyncClient(verify=context, timeout=2) as client:
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while True:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                try:
                    response = await client.get(f"https://127.0.0.1:{port}/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.2)
            assert response.json() == {"status": "ok"}
            with pytest.raises(httpx.TransportError):  # no plain HTTP on that port
                await client.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text()
