"""The operator commands against a real service on a free port (uvicorn, real HTTP)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from typer.testing import CliRunner, Result

from app import cli_ops
from app.cli import cli

WIDE = {"COLUMNS": "220"}  # rich tables at full width


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def service(app: FastAPI) -> AsyncIterator[str]:
    """The app served over HTTP by uvicorn in this test's event loop; its base URL."""
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await task


async def jobq(*args: str, env: dict[str, str] | None = None) -> Result:
    """`jobq ARGS…` in a thread, so this loop goes on serving the requests it makes."""
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, cli, list(args), env={**WIDE, **(env or {})})


def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("jobq: ")
    return line


@pytest.fixture
async def http(service: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service) as client:
        yield client


async def _job(http: httpx.AsyncClient, queue: str, **fields: Any) -> dict[str, Any]:
    response = await http.post(f"/v1/queues/{queue}/jobs", json={"type": "mailer", **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _lease(http: httpx.AsyncClient, queue: str) -> dict[str, Any]:
    response = await http.post("/v1/leases", json={"queues": [queue], "worker_id": "w-cli"})
    (only,) = response.json()["leases"]
    result: dict[str, Any] = only
    return result


async def test_stats_shows_every_queue_and_one_in_detail(
    service: str, http: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await _job(http, "mail")
    running = await _lease(http, "mail")
    beat = {"progress": {"percent": 40, "stage": "render"}}
    await http.post(f"/v1/leases/{running['lease_id']}/heartbeat", json=beat)

    result = await jobq("stats", env={"JOBQ_URL": service})  # the URL from the environment
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if "mail" in line]
    cells = [cell.strip() for cell in row.strip("│┃ ").split("│")]
    assert cells[:5] == ["mail", "2 (2)", "1", "0", cells[4]]
    assert cells[5] == "3/0/0" and cells[6] == "3/0/0"
    assert "jobs table:" in result.stdout and "oldest open transaction: none" in result.stdout

    detail = await jobq("stats", "mail", "--url", service)
    assert detail.exit_code == 0, detail.output
    assert "running in mail" in detail.stdout
    assert str(running["job"]["id"]) in detail.stdout and "40% render" in detail.stdout

    raw = await jobq("stats", "--json", "--url", service)
    assert raw.exit_code == 0
    assert [q["queue"] for q in json.loads(raw.stdout)["queues"]] == ["mail"]


async def test_jobs_list_and_show(service: str, http: httpx.AsyncClient) -> None:
    first = await _job(http, "mail", payload={"to": "ada"})
    await _job(http, "other")
    lease = await _lease(http, "mail")
    await http.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": {"type": "SMTPDown"}})

    listed = await jobq("jobs", "list", "--queue", "mail", "--url", service)
    assert listed.exit_code == 0, listed.output
    (row,) = [line for line in listed.stdout.splitlines() if f"│ {first['id']} " in line]
    assert "mail" in row and "queued" in row and "1/5" in row and "SMTPDown" in row
    assert "other" not in listed.stdout

    shown = await jobq("jobs", "show", str(first["id"]), "--url", service)
    assert shown.exit_code == 0, shown.output
    assert "mail / mailer" in shown.stdout and "SMTPDown" in shown.stdout
    assert "w-cli" in shown.stdout and "failed" in shown.stdout  # the attempts table
    assert "ada" not in shown.stdout  # the payload only with --json

    raw = await jobq("jobs", "show", str(first["id"]), "--json", "--url", service)
    assert json.loads(raw.stdout)["payload"] == {"to": "ada"}


async def test_problems_are_one_line(service: str) -> None:
    line = one_error_line(await jobq("jobs", "show", "999", "--url", service))
    assert line == "jobq: Job not found (404) [job_not_found]: no job has id 999"
    line = one_error_line(await jobq("jobs", "list", "--state", "nope", "--url", service))
    assert line.startswith("jobq: Validation error (422) [validation_error]: invalid fields")


async def test_an_unreachable_service_is_one_line_and_exit_1() -> None:
    closed = f"http://127.0.0.1:{_free_port()}"
    for command in (["stats"], ["jobs", "list"], ["queues", "pause", "q"]):
        line = one_error_line(await jobq(*command, "--url", closed))
        assert line.startswith(f"jobq: cannot reach the jobq service at {closed}: "), line
    line = one_error_line(await jobq("stats", "--url", "nonsense"))
    assert "nonsense" in line


def test_errors_that_are_not_problems_are_shown_briefly() -> None:
    html = httpx.Response(502, text="<html>\n  bad   gateway\n</html>")
    assert cli_ops.problem_message(html) == "HTTP 502 Bad Gateway: <html> bad gateway </html>"
    problem = httpx.Response(409, json={"title": "Conflict", "detail": "no", "code": "conflict"})
    assert cli_ops.problem_message(problem) == "Conflict (409) [conflict]: no"


def test_durations_read_well() -> None:
    shown = [cli_ops.seconds(s) for s in (None, 0.0123, 12.34, 245, 7380, 200000)]
    assert shown == ["-", "12ms", "12.3s", "4m05s", "2h03m", "2d07h"]


async def test_cancel_retry_pause_and_resume(service: str, http: httpx.AsyncClient) -> None:
    queued = await _job(http, "mail")
    result = await jobq("jobs", "cancel", str(queued["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"job {queued['id']}: cancelled\n"

    result = await jobq("jobs", "retry", str(queued["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"job {queued['id']}: queued, due ")

    running = await _lease(http, "mail")
    result = await jobq("jobs", "cancel", str(running["job"]["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert "running; cancellation requested" in result.stdout
    done = await http.post(f"/v1/leases/{running['lease_id']}/complete")
    assert done.json()["state"] == "succeeded"
    line = one_error_line(await jobq("jobs", "cancel", str(running["job"]["id"]), "--url", service))
    assert line.startswith("jobq: Job finished (409) [job_finished]: ")

    result = await jobq("queues", "pause", "mail", "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("queue mail: paused since ")
    assert (await http.get("/v1/queues/mail")).json()["paused"] is True
    result = await jobq("queues", "resume", "mail", "--url", service)
    assert result.stdout == "queue mail: active\n"
    assert (await http.get("/v1/queues/mail")).json()["paused"] is False

    result = await jobq("jobs", "retry", str(queued["id"]), "--json", "--url", service)
    assert result.exit_code == 1 and "job_not_retryable" in result.stderr


async def test_the_api_key_is_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"queue": "q", "paused": True, "paused_at": "2026"})

    real = cli_ops.make_client

    def recording(url: str, api_key: str | None) -> httpx.Client:
        client = real(url, api_key)
        client._transport = httpx.MockTransport(answer)
        return client

    monkeypatch.setattr(cli_ops, "make_client", recording)
    assert (await jobq("queues", "pause", "q", "--api-key", "s3cret")).exit_code == 0
    assert (await jobq("queues", "pause", "q", env={"JOBQ_API_KEY": "from-env"})).exit_code == 0
    assert (await jobq("queues", "pause", "q")).exit_code == 0
    assert seen == ["Bearer s3cret", "Bearer from-env", None]
