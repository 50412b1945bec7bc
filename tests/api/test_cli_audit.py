"""`jobq audit` against a real service on a free port (uvicorn, real HTTP)."""

from __future__ import annotations

import json

import asyncpg
import httpx

from tests.api.test_cli_ops import app, http, jobq, one_error_line, service
from tests.helpers import create_key

__all__ = ["app", "http", "service"]  # test_cli_ops's fixtures: the app served on a port


async def _act(http: httpx.AsyncClient, *queues: str) -> None:
    for queue in queues:
        assert (await http.post(f"/v1/queues/{queue}/pause")).status_code == 200


async def test_audit_lists_the_newest_first_and_filters(
    service: str, http: httpx.AsyncClient
) -> None:
    await _act(http, "mail", "reports", "mail")
    await http.put("/v1/queues/mail/settings", json={"max_running": 4})
    listed = await jobq("audit", "--url", service)
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["at", "key", "action", "target", "status", "request", "id"]
    assert [line.split()[3:6] for line in lines[1:]] == [
        ["setQueueSettings", "mail", "200"],
        ["pauseQueue", "mail", "200"],
        ["pauseQueue", "reports", "200"],
        ["pauseQueue", "mail", "200"],
    ]
    assert {line.split()[2] for line in lines[1:]} == {"-"}  # the service runs open: no key
    only = await jobq("audit", "--queue", "mail", "--action", "pauseQueue", "--url", service)
    assert len(only.stdout.splitlines()) == 3, only.stdout
    recent = await jobq("audit", "--since", "10m", "--limit", "1", "--url", service)
    rows = recent.stdout.splitlines()
    assert len(rows) == 3 and rows[2].startswith("more: --before "), recent.stdout
    older = await jobq("audit", *rows[2].removeprefix("more: ").split(), "--url", service)
    assert len(older.stdout.splitlines()) == 4, older.stdout  # the header and the other 3


async def test_audit_follows_pages_as_json(
    service: str, http: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await db.execute(
        "INSERT INTO jobq.audit_log (key_name, action, method, path, status, request_id)"
        " SELECT 'ops', 'pauseQueue', 'POST', '/v1/queues/q/pause', 200, 'r' || n"
        " FROM generate_series(1, 620) AS n"
    )
    result = await jobq("audit", "--limit", "600", "--json", "--url", service)
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)
    assert [e["request_id"] for e in entries] == [f"r{n}" for n in range(620, 20, -1)]
    everything = await jobq("audit", "--limit", "1000", "-o", "json", "--url", service)
    assert len(json.loads(everything.stdout)) == 620


async def test_audit_fits_80_columns(service: str, http: httpx.AsyncClient) -> None:
    await _act(http, "a-rather-long-queue-name-for-the-table", "mail")
    narrow = await jobq("audit", "--url", service, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, narrow.stdout
    assert lines[0].split() == ["when", "key", "action", "target", "status"]
    assert "pauseQueue" in lines[1] and "ago" in lines[1]


async def test_audit_names_the_key_and_refuses_bad_filters(
    service: str, http: httpx.AsyncClient, database_url: str, no_keys: asyncpg.Connection
) -> None:
    admin = await create_key(database_url, "ops", ["admin"])
    paused = await http.post("/v1/queues/mail/pause", headers={"Authorization": f"Bearer {admin}"})
    assert paused.status_code == 200
    result = await jobq("audit", "--url", service, "--api-key", admin)
    assert result.stdout.splitlines()[1].split()[2:4] == ["ops", "pauseQueue"], result.stdout
    refused = one_error_line(
        await jobq("audit", "--action", "purge-queue", "--url", service, "--api-key", admin)
    )
    assert "422" in refused and "action" in refused
    bad_since = await jobq("audit", "--since", "yesterday", "--url", service)
    assert bad_since.exit_code == 2 and "not a time" in bad_since.output
