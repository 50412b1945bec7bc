"""Keys limited to queues, open mode on loopback, starting beyond loopback, no secret in any
log line, and idempotency replays that show nothing to a key that may not read."""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest
import uvicorn
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from app.core.logging import JsonFormatter
from app.keys import (
    AuthRequired,
)
from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key

pytestmark = pytest.mark.usefixtures("no_keys")


async def test_a_key_limited_to_queues_sees_and_touches_only_those(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    admin = bearer(await create_key(database_url, "admin", ["admin"]))
    limited = bearer(
        await create_key(
            database_url, "limited", ["enqueue", "work", "read"], ["emails", "team_a.*"]
        )
    )
    service = await service_factory()
    client = service.remote
    ids = {}
    for queue in ("emails", "team_a.eu", "teamXa.eu", "other"):
        response = await client.post(f"/v1/queues/{queue}/jobs", json={"type": "t"}, headers=admin)
        ids[queue] = response.json()["id"]
    listed = (await client.get("/v1/jobs", headers=limited)).json()["jobs"]
    assert [job["queue"] for job in listed] == ["emails", "team_a.eu"]  # `_` is no wildcard
    assert (await client.get("/v1/jobs?queue=emails", headers=limited)).status_code == 200
    refused = await client.get("/v1/jobs?queue=other", headers=limited)
    assert assert_problem(refused, 403, "forbidden")["queues"] == ["other"]
    assert (await client.get(f"/v1/jobs/{ids['team_a.eu']}", headers=limited)).status_code == 200
    assert_problem(await client.get(f"/v1/jobs/{ids['other']}", headers=limited), 403, "forbidden")
    enqueue = await client.post("/v1/queues/team_a.us/jobs", json={"type": "t"}, headers=limited)
    assert enqueue.status_code == 201
    for queue in ("other", "teamXa.eu"):
        response = await client.post(
            f"/v1/queues/{queue}/jobs", json={"type": "t"}, headers=limited
        )
        assert_problem(response, 403, "forbidden")
    lease = {"queues": ["emails", "other"], "worker_id": "w"}
    refused = await client.post("/v1/leases", json=lease, headers=limited)
    assert assert_problem(refused, 403, "forbidden")["queues"] == ["other"]
    queues = (await client.get("/v1/queues", headers=limited)).json()["queues"]
    assert {q["queue"] for q in queues} == {"emails", "team_a.eu", "team_a.us"}
    assert (await client.get("/v1/queues/emails", headers=limited)).status_code == 200
    assert_problem(await client.get("/v1/queues/other", headers=limited), 403, "forbidden")
    lease["queues"] = ["emails", "team_a.eu"]
    leased = await client.post("/v1/leases", json={**lease, "max_jobs": 5}, headers=limited)
    assert sorted(x["job"]["queue"] for x in leased.json()["leases"]) == ["emails", "team_a.eu"]


async def test_open_on_loopback_with_no_key_and_says_so_loudly(
    service_factory: Callable[..., Awaitable[Service]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jobq.auth")
    service = await service_factory()
    assert (await service.local.get("/v1/jobs")).status_code == 200
    assert any("WITHOUT AUTHENTICATION" in r.getMessage() for r in caplog.records)


async def test_the_first_key_ends_open_mode_on_every_replica(
    service_factory: Callable[..., Awaitable[Service]],
) -> None:
    one = await service_factory()
    two = await service_factory(auth_cache_seconds=3600)
    assert (await two.local.get("/v1/jobs")).status_code == 200
    created = await one.local.post("/v1/keys", json={"name": "admin", "scopes": ["admin"]})
    assert created.status_code == 201, created.text  # open mode: anyone may, once
    key = created.json()["key"]
    assert_problem(await one.local.get("/v1/jobs"), 401, "unauthorized")
    started = time.monotonic()
    while (await two.local.get("/v1/jobs")).status_code == 200:
        assert time.monotonic() - started < 1.0, "the other replica is still open"
        await asyncio.sleep(0.01)
    assert (await two.local.get("/v1/jobs", headers=bearer(key))).status_code == 200


async def test_readiness_and_metrics_are_open_to_loopback_only(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory()
    for path in ("/readyz", "/metrics"):
        assert (await service.local.get(path)).status_code == 200
        assert_problem(await service.remote.get(path), 401, "unauthorized")
        assert (await service.remote.get(path, headers=bearer(key))).status_code == 200
    assert (await service.remote.get("/healthz")).status_code == 200


async def test_refuses_to_start_beyond_loopback_without_a_key(
    app_factory: Callable[..., FastAPI],
) -> None:
    app = app_factory(host="0.0.0.0")
    with pytest.raises(AuthRequired, match="JOBQ_AUTH=disabled"):
        async with LifespanManager(app):
            pass


async def test_starts_beyond_loopback_once_a_key_exists(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory(host="0.0.0.0")
    assert_problem(await service.local.get("/v1/jobs"), 401, "unauthorized")
    assert (await service.local.get("/v1/jobs", headers=bearer(key))).status_code == 200


async def test_auth_disabled_serves_everyone_everywhere(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await create_key(database_url, "reader", ["read"])
    caplog.set_level(logging.WARNING, logger="jobq.auth")
    service = await service_factory(host="0.0.0.0", auth="disabled")
    assert (await service.remote.post("/v1/queues/q/jobs", json={"type": "t"})).status_code == 201
    assert (await service.remote.get("/v1/keys")).status_code == 200
    assert any("DISABLED" in r.getMessage() for r in caplog.records)


async def test_no_log_line_holds_a_key_or_a_payload(
    app_factory: Callable[..., FastAPI],
    database_url: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "jobq"):
        # Whatever an earlier test configured, every record reaches caplog.
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
    admin = await create_key(database_url, "admin", ["admin"])
    worker = await create_key(database_url, "worker", ["work", "enqueue"])
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))  # bound here: no other process can take the port
    port = listening.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app_factory(),
            log_config=None,
            access_log=True,  # uvicorn's access log, as `jobq serve` runs it
            log_level="debug",
        )
    )
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    marker = "PAYLOAD-" + secrets.token_hex(8)
    try:
        while not server.started:
            assert not serving.done(), serving
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            work = bearer(worker)
            job = {"type": "t", "payload": {"card": marker}, "metadata": {"m": marker}}
            assert (
                await client.post("/v1/queues/q/jobs", json=job, headers=work)
            ).status_code == 201
            bad = {"type": "t", "payload": marker, "priority": marker}
            assert (
                await client.post("/v1/queues/q/jobs", json=bad, headers=work)
            ).status_code == 422
            lease = {"queues": ["q"], "worker_id": "w", "max_jobs": 2}
            leases = (await client.post("/v1/leases", json=lease, headers=work)).json()["leases"]
            token = leases[0]["lease_id"]
            beat = {"progress": {"message": marker}}
            assert (
                await client.post(f"/v1/leases/{token}/heartbeat", json=beat, headers=work)
            ).status_code == 200
            fail = {"error": {"type": "E", "message": marker, "details": marker}}
            assert (
                await client.post(f"/v1/leases/{token}/fail", json=fail, headers=work)
            ).status_code == 200
            done = {"result": marker}
            assert (
                await client.post(f"/v1/leases/{token}/complete", json=done, headers=work)
            ).status_code == 409
            created = await client.post(
                "/v1/keys", json={"name": "new", "scopes": ["read"]}, headers=bearer(admin)
            )
            new_key = created.json()["key"]
            assert (await client.delete("/v1/keys/new", headers=bearer(admin))).status_code == 200
            for key in (new_key, admin[:-3] + "abc", "jobq_" + marker):
                response = await client.get("/v1/jobs", headers=bearer(key))
                assert response.status_code == 401
    finally:
        server.should_exit = True
        await serving
        listening.close()
    # Every record as text and as the JSON line jobq writes (with its structured fields).
    lines = [caplog.handler.format(record) for record in caplog.records]
    lines += [JsonFormatter().format(record) for record in caplog.records]
    assert any(r.name == "uvicorn.access" for r in caplog.records), "no access log was captured"
    assert any(r.name == "jobq.access" for r in caplog.records), "no access log was captured"
    assert any("created API key" in line for line in lines)
    secrets_ = [marker, admin, worker, new_key]
    # jobq_<lookup id>_<secret>: the secret may itself hold "_" (URL-safe base64)
    secrets_ += [key.split("_", 2)[2] for key in (admin, worker, new_key)]
    leaked = [line for line in lines if any(s in line for s in secrets_)]
    assert leaked == []


async def test_replaying_a_key_without_read_shows_only_the_jobs_id_and_state(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    """Idempotency keys are often predictable: a producer that may only enqueue must not
    read another producer's job (payload, result, attempts) by replaying its key."""
    ingest = await create_key(database_url, "ingest", ["enqueue"])
    other = await create_key(database_url, "other-producer", ["enqueue", "read"])
    service = await service_factory()
    body = {"type": "report", "payload": {"secret": "s-31"}, "idempotency_key": "report-1"}
    first = await service.remote.post("/v1/queues/q-idem/jobs", json=body, headers=bearer(other))
    assert first.status_code == 201
    replay = await service.remote.post(
        "/v1/queues/q-idem/jobs", json={"type": "report", "idempotency_key": "report-1"},
        headers=bearer(ingest),
    )  # fmt: skip
    assert replay.status_code == 200
    assert replay.json() == {
        "id": first.json()["id"],
        "state": "queued",
        "deduplicated": True,
        "replaced": False,
    }
    # A key that may read the queue gets the whole job, as before; a new job is whole too.
    again = await service.remote.post("/v1/queues/q-idem/jobs", json=body, headers=bearer(other))
    assert (again.status_code, again.json()["payload"]) == (200, {"secret": "s-31"})
    fresh = await service.remote.post(
        "/v1/queues/q-idem/jobs", json={"type": "report", "idempotency_key": "report-2"},
        headers=bearer(ingest),
    )  # fmt: skip
    assert fresh.status_code == 201 and fresh.json()["payload"] is None
