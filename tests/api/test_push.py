"""Push delivery over real HTTP: a queue's target set through its settings, and the
dispatcher of the in-process service delivering to real endpoints on loopback
(tests/delivery_endpoint.py), each outcome of docs/push.md's table checked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from standardwebhooks import Webhook

from app.core.config import Settings
from app.delivery import Secrets, new_secret, sign
from app.main import create_app
from jobq_client import (
    AsyncClient,
    Client,
    Delivery,
    InvalidDelivery,
    NotFound,
    PushTarget,
    verify_delivery,
)
from tests.delivery_endpoint import Answer, Endpoint, Received, serving
from tests.fixtures.proxy import proxied
from tests.helpers import assert_problem, bearer, create_key, served

pytestmark = pytest.mark.pgbouncer

LOOPBACK = ("http://127.0.0.1:*",)
SECRET = new_secret()


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    async with serving(Endpoint(secrets=[SECRET], hang_seconds=5)) as served:
        yield served


@pytest.fixture
async def push_client(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> httpx.AsyncClient:
    app = app_factory(
        push_allowed_targets=LOOPBACK,
        push_breaker_failures=100,
        backoff_base_seconds=0.05,
        backoff_cap_seconds=0.05,
        backoff_jitter=0,
    )
    client: httpx.AsyncClient = await client_factory(app)
    return client


async def _push(client: httpx.AsyncClient, queue: str, url: str, **target: Any) -> httpx.Response:
    body = {"push": {"url": url, "secrets": [SECRET], **target}}
    return await client.put(f"/v1/queues/{queue}/settings", json=body)


async def _enqueue(client: httpx.AsyncClient, queue: str, **job: Any) -> int:
    answer = await client.post(
        f"/v1/queues/{queue}/jobs", json={"type": "work", "payload": {"n": 1}, **job}
    )
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["id"]
    return job_id


async def _until(
    client: httpx.AsyncClient, job_id: int, test: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if test(job):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.02)


def _state(*states: str) -> Callable[[dict[str, Any]], bool]:
    return lambda job: job["state"] in states


# ---- the target, as a queue setting ---------------------------------------------------


async def test_a_target_is_set_shown_without_its_secrets_and_cleared(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    answer = await _push(
        push_client, "hooks", endpoint.base + "/ok", headers={"x-env": "test"}, timeout_seconds=5
    )
    assert answer.status_code == 200, answer.text
    push = answer.json()["push"]
    assert push["url"] == endpoint.base + "/ok" and push["header_names"] == ["x-env"]
    assert push["timeout_seconds"] == 5 and len(push["secret_fingerprints"]) == 1
    shown = (await push_client.get("/v1/queues/hooks/settings")).text
    assert SECRET not in answer.text + shown and SECRET[6:] not in shown
    assert "test" not in shown.replace(endpoint.base, "")  # header values are not shown
    # secrets left out stay; a limit set beside the target applies too
    kept = await push_client.put(
        "/v1/queues/hooks/settings",
        json={"push": {"url": endpoint.base + "/verify"}, "max_running": 3},
    )
    assert kept.json()["push"]["secret_fingerprints"] == push["secret_fingerprints"]
    assert kept.json()["max_running"] == 3
    cleared = await push_client.put("/v1/queues/hooks/settings", json={"push": None})
    assert cleared.json()["push"] is None and cleared.json()["max_running"] == 3


@pytest.mark.parametrize(
    ("url", "allowed", "code"),
    [
        ("http://10.1.2.3/hook", ("http://*:*",), "target_not_allowed"),
        ("http://127.0.0.1:9/hook", ("http://*:*",), "target_not_allowed"),
        ("https://hooks.example.com/x", ("http://127.0.0.1:*",), "target_not_allowed"),
        ("ftp://127.0.0.1/x", LOOPBACK, "target_not_allowed"),
    ],
)
async def test_a_target_the_allowlist_refuses_is_422_and_changes_nothing(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    url: str,
    allowed: tuple[str, ...],
    code: str,
) -> None:
    client = await client_factory(app_factory(push_allowed_targets=allowed))
    answer = await _push(client, "hooks", url)
    assert answer.status_code == 422 and answer.json()["code"] == code, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert (await client.get("/v1/queues/hooks/settings")).json()["push"] is None


@pytest.mark.parametrize(
    "push",
    [
        {"secrets": ["whsec_" + "A" * 8]},  # too short
        {"secrets": [SECRET, SECRET]},
        {"secrets": None},  # a new target needs them
        {"headers": {"webhook-signature": "x"}},
        {"headers": {"bad name": "x"}},
        {"timeout_seconds": 0},
    ],
)
async def test_a_malformed_target_is_422(
    push_client: httpx.AsyncClient, endpoint: Endpoint, push: dict[str, Any]
) -> None:
    body = {"push": {"url": endpoint.base + "/ok", "secrets": [SECRET], **push}}
    answer = await push_client.put("/v1/queues/hooks/settings", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "validation_error"
    assert SECRET not in answer.text


# ---- deliveries and their outcomes ----------------------------------------------------


async def test_a_2xx_answer_completes_the_job_with_its_body(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    await _push(push_client, "hooks", endpoint.base + "/ok", headers={"x-env": "test"})
    job_id = await _enqueue(push_client, "hooks", metadata={"m": 1})
    job = await _until(push_client, job_id, _state("succeeded"))
    assert job["result"] == {"echo": True} and job["attempt"] == 1
    (got,) = endpoint.received("/ok")
    envelope = got.json()
    assert envelope["job_id"] == job_id and envelope["queue"] == "hooks"
    assert envelope["type"] == "work" and envelope["payload"] == {"n": 1}
    assert envelope["attempt"] == 1 and envelope["metadata"] == {"m": 1}
    assert envelope["parents"] == [] and str(envelope["lease_id"]).startswith(f"{job_id}-")
    assert got.headers["x-env"] == "test"
    assert got.headers["webhook-id"] == f"job_{job_id}_attempt_1"
    assert "traceparent" not in got.headers  # the job has no trace context
    Webhook(SECRET).verify(got.body, got.headers)


async def test_a_delivery_carries_the_jobs_trace_context(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    await _push(push_client, "hooks", endpoint.base + "/ok")
    trace = {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": "vendor=abc",
    }
    job_id = await _enqueue(push_client, "hooks", trace=trace)
    await _until(push_client, job_id, _state("succeeded"))
    (got,) = endpoint.received("/ok")
    assert (got.headers["traceparent"], got.headers["tracestate"]) == (
        trace["traceparent"],
        trace["tracestate"],
    )


async def test_a_child_is_delivered_with_its_parents_results(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    await _push(push_client, "hooks", endpoint.base + "/ok")
    parent = await _enqueue(push_client, "hooks")
    child = await _enqueue(push_client, "hooks", depends_on=[parent])
    await _until(push_client, child, _state("succeeded"))
    envelope = next(r.json() for r in endpoint.received("/ok") if r.json()["job_id"] == child)
    assert envelope["parents"] == [
        {"id": parent, "type": "work", "state": "succeeded", "result": {"echo": True}}
    ]


async def test_a_signature_verifies_with_a_rotated_secret(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    new = new_secret()
    body = {"push": {"url": endpoint.base + "/verify", "secrets": [new, SECRET]}}
    assert (await push_client.put("/v1/queues/hooks/settings", json=body)).status_code == 200
    job_id = await _enqueue(push_client, "hooks")
    job = await _until(push_client, job_id, _state("succeeded"))
    assert job["result"] == {"verified": True}  # the endpoint holds the old secret only
    got = endpoint.received("/verify")[0]
    Webhook(new).verify(got.body, got.headers)


async def test_a_refused_target_changes_no_other_setting(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    # a new target without secrets is refused before the limit sent with it is written
    body = {"max_running": 3, "push": {"url": endpoint.base + "/ok"}}
    refused = await push_client.put("/v1/queues/hooks/settings", json=body)
    problem = assert_problem(refused, 422, "validation_error")
    assert [e["loc"] for e in problem["errors"]] == [["body", "push", "secrets"]]
    settings = (await push_client.get("/v1/queues/hooks/settings")).json()
    assert (settings["max_running"], settings["push"]) == (None, None)


async def test_202_leaves_the_job_running_for_the_endpoint_to_finish(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    await _push(push_client, "hooks", endpoint.base + "/accepted", timeout_seconds=2)
    job_id = await _enqueue(push_client, "hooks")
    await _until(push_client, job_id, lambda _job: bool(endpoint.received("/accepted")))
    await asyncio.sleep(0.1)
    job = await _until(push_client, job_id, _state("running"))
    assert job["lease_expires_at"] is not None
    token = endpoint.received("/accepted")[0].json()["lease_id"]
    beat = await push_client.post(f"/v1/leases/{token}/heartbeat", json={})
    assert beat.status_code == 200, beat.text
    done = await push_client.post(f"/v1/leases/{token}/complete", json={"result": {"later": 1}})
    assert done.status_code == 200, done.text
    job = await _until(push_client, job_id, _state("succeeded"))
    assert job["result"] == {"later": 1}


async def test_with_keys_the_endpoint_finishes_a_202_with_a_work_key(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    endpoint: Endpoint,
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    del no_keys
    admin = bearer(await create_key(database_url, "ops", ["admin"]))
    worker = bearer(await create_key(database_url, "lambda", ["work"], ["hooks"]))
    client = await client_factory(app_factory(push_allowed_targets=LOOPBACK))
    body = {"push": {"url": endpoint.base + "/accepted", "secrets": [SECRET]}}
    assert (await client.put("/v1/queues/hooks/settings", json=body, headers=admin)).is_success
    made = await client.post("/v1/queues/hooks/jobs", json={"type": "t"}, headers=admin)
    job_id = made.json()["id"]
    deadline = time.monotonic() + 15
    while not endpoint.received("/accepted"):
        assert time.monotonic() < deadline, "never delivered"
        await asyncio.sleep(0.02)
    token = endpoint.received("/accepted")[0].json()["lease_id"]
    # the dispatcher leased with no key: the lease id is the endpoint's credential
    beat = await client.post(f"/v1/leases/{token}/heartbeat", json={}, headers=worker)
    assert beat.status_code == 200, beat.text
    done = await client.post(f"/v1/leases/{token}/complete", json={"result": 1}, headers=worker)
    assert done.status_code == 200, done.text
    job = (await client.get(f"/v1/jobs/{job_id}", headers=admin)).json()
    assert (job["state"], job["result"]) == ("succeeded", 1)
    failed = {"error": {"type": "late", "message": "too late"}}
    again = await client.post(f"/v1/leases/{token}/fail", json=failed, headers=worker)
    assert again.status_code == 409, again.text  # finished: the lease is spent


@pytest.mark.parametrize("path", ["/busy", "/unavailable"])
async def test_retry_after_requeues_the_job_without_spending_an_attempt(
    push_client: httpx.AsyncClient, endpoint: Endpoint, path: str, db: asyncpg.Connection
) -> None:
    endpoint.retry_after = "30"
    await _push(push_client, "hooks", endpoint.base + path)
    job_id = await _enqueue(push_client, "hooks", max_attempts=1)
    await _until(push_client, job_id, lambda _job: bool(endpoint.received(path)))
    job = await _until(push_client, job_id, _state("queued"))
    assert job["attempt"] == 0 and job["last_error"] is None
    wait = await db.fetchval("SELECT extract(epoch FROM run_at - now()) FROM jobq.jobs")
    assert 25 < wait <= 30


async def test_other_answers_fail_the_attempt_and_the_backoff_retries_it(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    await _push(push_client, "hooks", endpoint.base + "/error")
    job_id = await _enqueue(push_client, "hooks", max_attempts=2)
    job = await _until(push_client, job_id, _state("failed"))
    assert job["attempt"] == 2 and len(endpoint.received("/error")) == 2
    error = job["last_error"]
    assert error["type"] == "http_500" and error["details"]["status"] == 500
    assert error["message"].startswith("boom") and len(error["message"]) <= 512
    assert [a["error"]["details"]["status"] for a in job["attempts"]] == [500, 500]


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/hang", "timeout"), ("/close", "connection"), ("/redirect", "http_307")],
)
async def test_a_timeout_a_closed_connection_or_a_redirect_fails_the_attempt(
    push_client: httpx.AsyncClient, endpoint: Endpoint, path: str, kind: str
) -> None:
    await _push(push_client, "hooks", endpoint.base + path, timeout_seconds=0.5)
    job_id = await _enqueue(push_client, "hooks", max_attempts=1)
    job = await _until(push_client, job_id, _state("failed"))
    assert job["last_error"]["type"] == kind
    assert endpoint.received("/ok") == []  # a redirect is not followed


async def test_workers_do_not_lease_a_pushed_queue(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    endpoint: Endpoint,
) -> None:
    client = await client_factory(app_factory(push_allowed_targets=LOOPBACK, push_concurrency=1))
    await _push(client, "hooks", endpoint.base + "/hang", timeout_seconds=5)
    await _enqueue(client, "hooks")
    first = await _enqueue(client, "hooks")
    await _until(client, first - 1, _state("running"))  # the dispatcher's one delivery
    await _enqueue(client, "pulled")
    leased = await client.post(
        "/v1/leases", json={"queues": ["hooks", "pulled"], "max_jobs": 10, "worker_id": "w"}
    )
    assert [lease["job"]["queue"] for lease in leased.json()["leases"]] == ["pulled"]
    assert (await client.get(f"/v1/jobs/{first}")).json()["state"] == "queued"


async def test_consecutive_failures_open_the_targets_breaker(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    endpoint: Endpoint,
    db: asyncpg.Connection,
) -> None:
    client = await client_factory(
        app_factory(
            push_allowed_targets=LOOPBACK,
            push_breaker_failures=2,
            push_breaker_pause_seconds=60,
            backoff_base_seconds=0,
            backoff_cap_seconds=0,
        )
    )
    await _push(client, "hooks", endpoint.base + "/error")
    job_id = await _enqueue(client, "hooks", max_attempts=10)
    await _until(client, job_id, lambda job: job["attempt"] >= 2)
    await asyncio.sleep(0.5)
    assert len(endpoint.received("/error")) == 2  # held back: no third delivery
    row = await db.fetchrow("SELECT * FROM jobq.delivery_breakers")
    assert row is not None and row["target"] == "queue:hooks" and row["trips"] == 1
    assert row["last_error"].startswith("5xx: boom")
    health = (await client.get("/v1/queues/hooks/push")).json()
    assert health["breaker"]["state"] == "open" and health["breaker"]["failures"] == 2
    assert health["target"]["url"] == endpoint.base + "/error"
    metrics = (await client.get("/metrics")).text
    assert 'jobq_push_deliveries_total{outcome="5xx",queue="hooks"}' in metrics
    assert "jobq_push_delivery_seconds_bucket" in metrics
    # an operator closes it: deliveries resume at once
    reset = await client.post("/v1/queues/hooks/push/reset")
    assert reset.status_code == 200 and reset.json()["breaker"]["state"] == "closed"
    await _until(client, job_id, lambda job: job["attempt"] >= 3)
    pulled = await client.get("/v1/queues/pulled/push")
    assert pulled.status_code == 404 and pulled.json()["code"] == "not_found"


async def test_shutdown_gives_the_leases_of_unfinished_deliveries_back(
    app_factory: Callable[..., FastAPI], endpoint: Endpoint, db: asyncpg.Connection
) -> None:
    app = app_factory(push_allowed_targets=LOOPBACK, shutdown_grace_seconds=0.3)
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=60) as manager:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://jobq.test"
        )
        await _push(client, "hooks", endpoint.base + "/hang", timeout_seconds=20)
        job_id = await _enqueue(client, "hooks")
        await _until(client, job_id, _state("running"))
        await client.aclose()
        started = time.monotonic()
    assert time.monotonic() - started < 5
    row = await db.fetchrow("SELECT state, attempt FROM jobq.jobs WHERE id = $1", job_id)
    assert row is not None and (row["state"], row["attempt"]) == ("queued", 0)


async def test_an_answer_while_the_database_is_away_is_written_when_it_is_back(
    make_settings: Callable[..., Settings],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    """The endpoint answers 200 while the service cannot reach PostgreSQL: the job
    succeeds once the database is back, delivered once, not after its lease expires."""
    database_url = make_settings().database_url  # direct, or PgBouncer's
    assert database_url is not None
    async with serving(Endpoint(hang_seconds=0.5)) as slow, proxied(database_url) as (proxy, url):
        settings = make_settings(
            database_url=url, push_allowed_targets=LOOPBACK, push_lease_margin_seconds=300
        )
        client = await client_factory(create_app(settings, database_url=url, run_maintenance=False))
        await _push(client, "hooks", slow.base + "/hang", timeout_seconds=10)
        job_id = await _enqueue(client, "hooks")
        while not slow.received("/hang"):
            await asyncio.sleep(0.01)
        await proxy.stop()  # the answer comes in 0.5 s, with the database away
        await asyncio.sleep(2)
        await proxy.start()
        job = await _until(client, job_id, _state("succeeded"))
    assert job["attempt"] == 1 and len(slow.received("/hang")) == 1


async def test_the_sdk_verifies_a_delivery_and_refuses_a_replay(
    push_client: httpx.AsyncClient, endpoint: Endpoint
) -> None:
    old, new = SECRET, new_secret()
    seen: list[Delivery] = []

    def receive(got: Received) -> Answer:
        try:
            delivery = verify_delivery(got.body, got.headers, [new, old])
        except InvalidDelivery:
            return 401, {}, b""
        seen.append(delivery)
        return 200, {"content-type": "application/json"}, b'{"sdk": true}'

    endpoint.extra["/sdk"] = receive
    body = {"push": {"url": endpoint.base + "/sdk", "secrets": [old]}}
    await push_client.put("/v1/queues/hooks/settings", json=body)
    job_id = await _enqueue(push_client, "hooks")
    job = await _until(push_client, job_id, _state("succeeded"))
    assert job["result"] == {"sdk": True}
    (delivery,) = seen
    assert (delivery.job_id, delivery.type, delivery.payload) == (job_id, "work", {"n": 1})
    assert delivery.message_id == f"job_{job_id}_attempt_1"
    # the same request again ten minutes on, or with another secret: refused
    got = endpoint.received("/sdk")[0]
    replay = {**sign(Secrets([old]), delivery.message_id, got.body.decode(),
                     at=datetime.now(UTC) - timedelta(minutes=10))}  # fmt: skip
    with pytest.raises(InvalidDelivery, match="too old"):
        verify_delivery(got.body, replay, old)
    with pytest.raises(InvalidDelivery):
        verify_delivery(got.body, got.headers, new_secret())


async def test_the_python_sdk_reads_and_resets_a_pushed_queues_breaker(
    app_factory: Callable[..., FastAPI], endpoint: Endpoint
) -> None:
    app = app_factory(
        push_allowed_targets=LOOPBACK,
        push_breaker_failures=2,
        push_breaker_pause_seconds=60,
        backoff_base_seconds=0,
        backoff_cap_seconds=0,
    )
    async with served(app) as url, AsyncClient(url) as jobq:
        target = PushTarget(endpoint.base + "/error", secrets=[SECRET])
        await jobq.set_queue_settings("hooks", push=target)
        await jobq.enqueue("hooks", "work", {"n": 1}, max_attempts=10)
        deadline = time.monotonic() + 15
        while (health := await jobq.get_push_health("hooks")).breaker.state != "open":
            assert time.monotonic() < deadline, health
            await asyncio.sleep(0.05)
        assert health.queue == "hooks" and health.target.url == endpoint.base + "/error"
        assert health.breaker.failures == 2 and health.breaker.trips == 1
        assert health.breaker.open_until is not None
        assert (health.breaker.last_error or "").startswith("5xx: boom")
        with Client(url) as sync:  # the same call, without asyncio
            reset = await asyncio.to_thread(sync.reset_push, "hooks")
        assert reset.breaker.state == "closed" and reset.breaker.open_until is None
        with pytest.raises(NotFound):
            await jobq.get_push_health("pulled")  # no target: workers lease its jobs
