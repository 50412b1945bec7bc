"""Event subscriptions against real HTTP endpoints on loopback (allowlisted): events
arrive signed, in order per job, once the endpoint answers 2xx (retried after a
failure), and never for a rolled-back change; the admin API's rules."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI, Request, Response
from standardwebhooks import Webhook
from typer.testing import CliRunner

from app.cli import cli
from jobq_client import AsyncClient
from tests.helpers import assert_problem, enqueue, lease_one, served

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

LOOPBACK = ("http://127.0.0.1:*",)
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes of base64
QUICK = {
    "push_allowed_targets": LOOPBACK,
    "subscription_interval_seconds": 0.05,
    "subscription_backoff_base_seconds": 0.05,
    "subscription_backoff_cap_seconds": 0.2,
}


class Endpoint:
    """A receiver that answers `failures` requests with 500, then 204; keeps each
    request's verified body."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.requests = 0
        self.batches: list[dict[str, Any]] = []
        self.app = FastAPI()
        self.app.post("/hook")(self.receive)

    async def receive(self, request: Request) -> Response:
        self.requests += 1
        body = await request.body()
        Webhook(SECRET).verify(body, dict(request.headers))  # raises when not signed
        if self.failures:
            self.failures -= 1
            return Response(status_code=500, content=b"down")
        self.batches.append(json.loads(body))
        return Response(status_code=204)

    def events(self) -> list[dict[str, Any]]:
        return [e for batch in self.batches for e in batch["events"]]


@pytest.fixture
async def app(app_factory: Callable[..., FastAPI]) -> FastAPI:
    return app_factory(**QUICK)


async def _endpoint(failures: int = 0) -> AsyncIterator[tuple[Endpoint, str]]:
    endpoint = Endpoint(failures)
    async with served(endpoint.app) as url:
        yield endpoint, f"{url}/hook"


async def _subscribe(client: httpx.AsyncClient, url: str, **extra: Any) -> dict[str, Any]:
    body = {"url": url, "secrets": [SECRET], **extra}
    response = await client.put("/v1/subscriptions/audit", json=body)
    assert response.status_code == 201, response.text
    found: dict[str, Any] = response.json()
    return found


async def _until(endpoint: Endpoint, count: int) -> list[dict[str, Any]]:
    for _ in range(400):
        if len(endpoint.events()) >= count:
            return endpoint.events()
        await asyncio.sleep(0.025)
    raise AssertionError(f"{len(endpoint.events())} events arrived, not {count}")


async def test_events_arrive_signed_and_in_order_per_job(client: httpx.AsyncClient) -> None:
    async for endpoint, url in _endpoint():
        made = await _subscribe(client, url, queues=["mail"])
        assert made["secret"] is None and made["secret_fingerprints"] != [SECRET]
        jobs = [await enqueue(client, "mail") for _ in range(3)]
        await enqueue(client, "other")  # filtered out
        for _ in jobs:
            lease = await lease_one(client, "mail")
            done = await client.post(f"/v1/leases/{lease['lease_id']}/complete", json={})
            assert done.status_code == 200, done.text
        events = await _until(endpoint, 9)
    positions = [e["id"] for e in events]
    assert positions == sorted(positions) and len(set(positions)) == 9
    for job in jobs:
        kinds = [e["kind"] for e in events if e["job_id"] == job["id"]]
        assert kinds == ["enqueued", "started", "succeeded"]
    assert {e["queue"] for e in events} == {"mail"}
    state = (await client.get("/v1/subscriptions/audit")).json()
    assert state["position"] >= positions[-1] and state["last_status"] == 204
    assert state["breaker"]["state"] == "closed"


async def test_a_failed_delivery_is_retried_until_it_succeeds(client: httpx.AsyncClient) -> None:
    async for endpoint, url in _endpoint(failures=2):
        await _subscribe(client, url)
        first = await enqueue(client, "mail")
        second = await enqueue(client, "mail")
        events = await _until(endpoint, 2)
    assert endpoint.requests >= 3  # two failures, then the same events again
    assert [e["job_id"] for e in events] == [first["id"], second["id"]]


async def test_a_rolled_back_change_is_never_delivered(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    async for endpoint, url in _endpoint():
        await _subscribe(client, url)
        with pytest.raises(RuntimeError):
            async with db.transaction():
                await db.fetch("SELECT * FROM jobq.enqueue('mail', 'undone')")
                raise RuntimeError("roll back")
        kept = await enqueue(client, "mail", type="kept")
        events = await _until(endpoint, 1)
        await asyncio.sleep(0.3)  # nothing else comes
    assert [(e["job_id"], e["type"]) for e in endpoint.events()] == [(kept["id"], "kept")]
    assert len(events) == 1


async def test_the_admin_api(client: httpx.AsyncClient) -> None:
    refused = await client.put("/v1/subscriptions/x", json={"url": "http://10.1.2.3/hook"})
    assert_problem(refused, 422, "target_not_allowed")
    made = await client.put("/v1/subscriptions/x", json={"url": "http://127.0.0.1:9/hook"})
    assert made.status_code == 201, made.text
    secret = made.json()["secret"]
    assert secret.startswith("whsec_")  # made for it, shown this once
    again = await client.put(
        "/v1/subscriptions/x", json={"url": "http://127.0.0.1:9/hook", "kinds": ["failed"]}
    )
    assert again.status_code == 200 and again.json()["secret"] is None
    assert again.json()["secret_fingerprints"] == made.json()["secret_fingerprints"]
    listed = (await client.get("/v1/subscriptions")).json()["subscriptions"]
    assert [(s["name"], s["kinds"]) for s in listed] == [("x", ["failed"])]
    assert secret not in json.dumps(listed)
    reset = await client.post("/v1/subscriptions/x/reset")
    assert reset.status_code == 200 and reset.json()["breaker"]["state"] == "closed"
    assert (await client.delete("/v1/subscriptions/x")).status_code == 204
    assert_problem(await client.get("/v1/subscriptions/x"), 404, "subscription_not_found")


async def test_the_cli_and_the_sdk_manage_subscriptions(app: FastAPI) -> None:
    async with served(app) as url:
        env = {"JOBQ_URL": url, "COLUMNS": "200"}
        made = await asyncio.to_thread(
            CliRunner().invoke,
            cli,
            [
                "subscriptions",
                "set",
                "audit",
                "--target",
                "http://127.0.0.1:9/h",
                "--kind",
                "failed",
            ],
            env=env,
        )
        assert made.exit_code == 0, made.output
        assert "secret (shown once): whsec_" in made.stdout
        listed = await asyncio.to_thread(
            CliRunner().invoke, cli, ["subscriptions", "list"], env=env
        )
        assert "audit" in listed.stdout and "closed" in listed.stdout
        async with AsyncClient(url) as jobq:
            found = await jobq.get_subscription("audit")
            assert found["kinds"] == ["failed"]
            await jobq.delete_subscription("audit")
            assert await jobq.list_subscriptions() == []


async def test_a_subscription_that_is_down_does_not_hold_the_outbox_back(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(**QUICK, push_breaker_failures=1000)
    client: httpx.AsyncClient = await client_factory(app)
    async for endpoint, url in _endpoint(failures=1_000_000):
        await _subscribe(client, url)
        for _ in range(3):
            await enqueue(client, "mail")
        for _ in range(400):  # the endpoint refuses the first batch, again and again
            if endpoint.requests >= 2:
                break
            await asyncio.sleep(0.025)
        # retention passes for every event but the newest: the outbox is pruned anyway
        pruner = app.state.services.events_pruner
        pruner.retain_seconds = 0
        assert await pruner.run_once()
        first = await db.fetchval(
            "SELECT min(position) FROM jobq.job_events WHERE position IS NOT NULL"
        )
        assert first > 1
        endpoint.failures = 0  # back up: the events kept, and the new ones, arrive
        later = await enqueue(client, "mail")
        events = await _until(endpoint, 2)
    assert events[0]["id"] == first and events[-1]["job_id"] == later["id"]
    state = (await client.get("/v1/subscriptions/audit")).json()
    assert state["missed"] == first - 1  # it started at position 0
    assert state["position"] >= events[-1]["id"]
