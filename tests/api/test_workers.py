"""`GET /v1/workers` and the workers' presence: idle workers listed with what they
serve, gone ones, then pruned; throughput; quiet and resume, obeyed on every replica;
who may do what."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from app.workers import Presence, WorkersPruner
from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key, enqueue, lease

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

WORKER = {"Jobq-Worker-Sdk": "jobq-client-python/1.2.3", "Jobq-Worker-Host": "box-1"}


def _presence(app: FastAPI) -> Presence:
    presence: Presence = app.state.services.presence
    return presence


async def _workers(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await client.get("/v1/workers", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["workers"]
    return found


async def _ping(
    client: httpx.AsyncClient, worker_id: str, headers: dict[str, str] | None = None, **body: Any
) -> httpx.Response:
    return await client.post(
        f"/v1/workers/{worker_id}/presence", json=body, headers={**WORKER, **(headers or {})}
    )


async def test_an_idle_worker_is_listed_with_what_it_serves(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    pinged = await _ping(client, "idle-1", queues=["mail", "sms"], types=["send"])
    assert pinged.status_code == 200, pinged.text
    assert pinged.json() == {"worker_id": "idle-1", "quiet": False}
    assert "Jobq-Worker-Quiet" not in pinged.headers
    assert await _workers(client) == []  # in this replica's memory until its flush
    assert await _presence(app).run_once() == 1
    (shown,) = await _workers(client)
    assert shown["worker_id"] == "idle-1" and shown["status"] == "live"
    assert (shown["sdk"], shown["version"], shown["host"]) == (
        "jobq-client-python",
        "1.2.3",
        "box-1",
    )
    assert (shown["queues"], shown["types"]) == (["mail", "sms"], ["send"])
    assert shown["running"] == 0 and shown["job_ids"] == [] and shown["quiet"] is False
    assert shown["first_seen"] and shown["last_seen"]


async def test_a_replica_writes_what_it_saw_when_it_stops(
    app_factory: Callable[..., FastAPI], db: asyncpg.Connection
) -> None:
    app = app_factory()  # its first flush would come JOBQ_WORKER_FLUSH_SECONDS from now
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=60) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq.test") as client:
            assert (await _ping(client, "last-1", queues=["q"])).status_code == 200
    assert await db.fetchval("SELECT array_agg(worker_id) FROM jobq.workers") == ["last-1"]


async def test_a_lease_call_registers_its_worker_and_counts(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await enqueue(client, "mail")
    first, second = await lease(client, "mail", max_jobs=2, worker="w-9", types=["task"])
    (third,) = await lease(client, "mail", worker="w-9")
    await _presence(app).run_once()
    (shown,) = await _workers(client)
    assert (shown["queues"], shown["types"], shown["sdk"]) == (["mail"], [], None)
    assert (shown["running"], shown["leased"], shown["finished"]) == (3, 3, 0)
    header = {"Jobq-Worker": "w-9"}
    done = await client.post(f"/v1/leases/{first['lease_id']}/complete", headers=header)
    assert done.status_code == 200
    failed = {"error": {"type": "E"}, "retryable": False}
    url = f"/v1/leases/{second['lease_id']}/fail"
    assert (await client.post(url, json=failed, headers=header)).status_code == 200
    acks = {"acks": [{"lease_id": third["lease_id"], "outcome": "complete"}]}
    assert (await client.post("/v1/acks", json=acks, headers=header)).status_code == 200
    await _presence(app).run_once()
    (shown,) = await _workers(client)
    assert (shown["running"], shown["leased"], shown["finished"]) == (0, 3, 3)


async def test_throughput_is_the_finishes_of_the_last_minute_window(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    _presence(app).saw("w-1", queues=["mail"], finished=30)
    await _presence(app).run_once()
    # the window began two minutes ago: the next flush closes it
    await db.execute("UPDATE jobq.workers SET window_at = now() - interval '120 seconds'")
    _presence(app).saw("w-1", finished=4)
    await _presence(app).run_once()
    (shown,) = await _workers(client)
    assert shown["finished"] == 34
    assert shown["finished_per_minute"] == pytest.approx(15, rel=0.05)


async def test_holders_of_running_jobs_are_listed_and_quieted_before_any_flush(
    client: httpx.AsyncClient,
) -> None:
    await enqueue(client, "a")
    await lease(client, "a", worker="w-1")
    (shown,) = await _workers(client)
    assert (shown["worker_id"], shown["running"], shown["queues"]) == ("w-1", 1, ["a"])
    assert shown["status"] == "live" and shown["sdk"] is None
    quieted = await client.post("/v1/workers/w-1/quiet")  # what the listing shows may be quieted
    assert quieted.status_code == 200 and quieted.json()["quiet"] is True
    await enqueue(client, "a")
    assert await lease(client, "a", worker="w-1") == []


async def test_a_worker_unseen_is_gone_then_pruned(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await _ping(client, "old", queues=["mail"])
    await _ping(client, "new", queues=["mail"])
    await _presence(app).run_once()
    gone = app.state.services.settings.worker_gone_seconds
    await db.execute(
        "UPDATE jobq.workers SET last_seen = now() - make_interval(secs => $1 + 1)"
        " WHERE worker_id = 'old'",
        gone,
    )
    assert [(w["worker_id"], w["status"]) for w in await _workers(client)] == [
        ("new", "live"),
        ("old", "gone"),
    ]
    retain = app.state.services.settings.worker_retain_seconds
    await db.execute(
        "UPDATE jobq.workers SET last_seen = now() - make_interval(secs => $1 + 1)"
        " WHERE worker_id = 'old'",
        retain,
    )
    assert [w["worker_id"] for w in await _workers(client)] == ["new"]
    pruner: WorkersPruner = app.state.services.workers_pruner
    assert await pruner.run_once() == 1
    assert await db.fetchval("SELECT array_agg(worker_id) FROM jobq.workers") == ["new"]


async def test_workers_come_a_page_at_a_time(app: FastAPI, client: httpx.AsyncClient) -> None:
    for n in range(3):
        await _ping(client, f"w-{n}", queues=["q"])
    await _presence(app).run_once()
    response = await client.get("/v1/workers", params={"limit": 2})
    page = response.json()
    assert [w["worker_id"] for w in page["workers"]] == ["w-0", "w-1"]
    assert page["next_after"] == "w-1"
    rest = (await client.get("/v1/workers", params={"after": "w-1"})).json()
    assert [w["worker_id"] for w in rest["workers"]] == ["w-2"] and rest["next_after"] is None


async def test_a_quiet_worker_is_leased_nothing_and_finishes_what_it_holds(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await enqueue(client, "mail")
    (held,) = await lease(client, "mail", worker="w-1")
    await _presence(app).run_once()
    quieted = await client.post("/v1/workers/w-1/quiet")
    assert quieted.status_code == 200, quieted.text
    assert quieted.json()["quiet"] is True and quieted.json()["quiet_at"]
    body = {"queues": ["mail"], "worker_id": "w-1", "max_jobs": 5}
    refused = await client.post("/v1/leases", json=body)
    assert refused.status_code == 200 and refused.json() == {"leases": []}
    assert refused.headers["Jobq-Worker-Quiet"] == "1"
    beat = await client.post(f"/v1/leases/{held['lease_id']}/heartbeat")
    assert beat.status_code == 200
    acks = {"acks": [{"lease_id": held["lease_id"], "outcome": "complete"}], "lease": body}
    acked = await client.post("/v1/acks", json=acks)
    assert acked.status_code == 200 and acked.headers["Jobq-Worker-Quiet"] == "1"
    assert acked.json()["results"][0]["state"] == "succeeded"
    assert acked.json()["leases"] == []
    pinged = await _ping(client, "w-1")
    assert pinged.json()["quiet"] is True and pinged.headers["Jobq-Worker-Quiet"] == "1"
    other = await client.post("/v1/leases", json={**body, "worker_id": "w-2"})
    assert len(other.json()["leases"]) == 2  # only that worker is quiet
    await _presence(app).run_once()  # what the flush reads back keeps it quiet
    (shown, _) = await _workers(client)
    assert shown["quiet"] is True and shown["quieted_by"] is None  # open mode: no key
    resumed = await client.post("/v1/workers/w-1/resume")
    assert resumed.json() == {"worker_id": "w-1", "quiet": False, "quiet_at": None,
                              "quieted_by": None}  # fmt: skip
    await enqueue(client, "mail")
    assert len((await client.post("/v1/leases", json=body)).json()["leases"]) == 1


async def test_a_quiet_asked_of_one_replica_is_obeyed_on_another(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    one, two = app_factory(), app_factory()
    a, b = await client_factory(one), await client_factory(two)
    await enqueue(a, "mail")
    await _ping(b, "w-1", queues=["mail"])
    await _presence(two).run_once()
    assert (await a.post("/v1/workers/w-1/quiet")).status_code == 200
    body = {"queues": ["mail"], "worker_id": "w-1"}
    # B knows it from its next flush on (A, which took the call, at once)
    await _presence(two).run_once()
    refused = await b.post("/v1/leases", json=body)
    assert refused.json()["leases"] == [] and refused.headers["Jobq-Worker-Quiet"] == "1"
    assert (await a.post("/v1/workers/w-1/resume")).status_code == 200
    await _presence(two).run_once()
    assert len((await b.post("/v1/leases", json=body)).json()["leases"]) == 1


async def test_replicas_flushing_the_same_workers_at_once_add_up(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    apps = [app_factory() for _ in range(3)]
    for app in apps:
        await client_factory(app)
    ids = [f"w-{n:02}" for n in range(40)]
    for _ in range(5):
        for n, app in enumerate(apps):
            for worker_id in ids[n:] + ids[:n]:  # each replica saw them in its own order
                _presence(app).saw(worker_id, queues=["q"], leased=1, finished=1)
        await asyncio.gather(*(_presence(app).run_once() for app in apps))
    rows = await db.fetch("SELECT leased, finished FROM jobq.workers")
    assert len(rows) == len(ids)
    assert {(r["leased"], r["finished"]) for r in rows} == {(15, 15)}


async def test_who_may_see_and_quiet_workers(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    admin = bearer(await create_key(database_url, "ops", ["admin"]))
    reader = bearer(await create_key(database_url, "reader", ["read"]))
    worker = bearer(await create_key(database_url, "worker", ["work"], ["mail*"]))
    mail = bearer(await create_key(database_url, "mail-reader", ["read"], ["mail*"]))
    service = await service_factory()
    http = service.remote
    pinged = await _ping(http, "w-1", worker, queues=["mail"])
    assert pinged.status_code == 200, pinged.text
    assert (await _ping(http, "w-2", admin, queues=["sms"])).status_code == 200
    assert_problem(await _ping(http, "w-3", worker, queues=["sms"]), 403, "forbidden")
    assert_problem(await _ping(http, "w-3", reader, queues=["mail"]), 403, "forbidden")
    assert_problem(await http.post("/v1/workers/w-1/presence"), 401, "unauthorized")
    await _presence(service.app).run_once()
    assert_problem(await http.get("/v1/workers", headers=worker), 403, "forbidden")
    listed = await http.get("/v1/workers", headers=reader)
    assert [w["worker_id"] for w in listed.json()["workers"]] == ["w-1", "w-2"]
    limited = await http.get("/v1/workers", headers=mail)
    assert [w["worker_id"] for w in limited.json()["workers"]] == ["w-1"]
    assert_problem(await http.post("/v1/workers/w-1/quiet", headers=reader), 403, "forbidden")
    assert_problem(await http.post("/v1/workers/w-1/quiet", headers=worker), 403, "forbidden")
    assert_problem(await http.post("/v1/workers/nobody/quiet", headers=admin), 404,
                   "worker_not_found")  # fmt: skip
    quieted = await http.post("/v1/workers/w-1/quiet", headers=admin)
    assert quieted.status_code == 200 and quieted.json()["quieted_by"] == "ops"
    assert_problem(await http.post("/v1/workers/w-1/resume", headers=reader), 403, "forbidden")
    long_id = "w" * 256
    assert_problem(await http.post(f"/v1/workers/{long_id}/quiet", headers=admin), 422,
                   "validation_error")  # fmt: skip
