"""API keys over HTTP: every route and every kind of key, revocation, open mode, leases bound
to their key, queue rules, and no secret or payload in any log line.

The matrix is generated from the app's route table: a route that declares no access rule
(see app/keys/access.py), or that has no example request here, fails it.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from app.core.config import Settings
from app.core.logging import JsonFormatter
from app.db.database import Database
from app.db.engine import create_engine
from app.keys import (
    Authenticator,
    AuthRequired,
    Keys,
    KeysRepository,
    QueueRule,
    access_of,
    declared_access,
    mint,
    served_routes,
)
from app.main import create_app
from tests.helpers import assert_problem

REMOTE_PEER = ("203.0.113.7", 40000)  # TEST-NET-3: not this machine
NOTIFY_WAIT_SECONDS = 2.0


def bearer(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


async def create_key(
    database_url: str, name: str, scopes: list[str], queues: list[str] | None = None
) -> str:
    """A key made as `jobq keys create` makes it: straight in the database."""
    engine = create_engine(database_url, 1)
    try:
        key, _ = await Keys(KeysRepository(Database(engine))).create(name, scopes, queues)
        return key
    finally:
        await engine.dispose()


async def revoke_key(database_url: str, name: str) -> None:
    """As `jobq keys revoke` does it."""
    engine = create_engine(database_url, 1)
    try:
        await Keys(KeysRepository(Database(engine))).revoke(name)
    finally:
        await engine.dispose()


pytestmark = pytest.mark.usefixtures("no_keys")


@dataclass
class Service:
    """One replica: a client on this machine (`local`) and one from elsewhere (`remote`)."""

    app: FastAPI
    local: httpx.AsyncClient
    remote: httpx.AsyncClient

    @property
    def auth(self) -> Authenticator:
        auth: Authenticator = self.app.state.auth
        return auth

    async def listening(self) -> None:
        """Wait until its LISTEN connection is up (cached keys are trusted only then)."""
        deadline = time.monotonic() + 10
        while not self.auth.listening:
            assert time.monotonic() < deadline, "the listener never connected"
            await asyncio.sleep(0.02)


@pytest.fixture
async def service_factory(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> AsyncIterator[Callable[..., Awaitable[Service]]]:
    remotes: list[httpx.AsyncClient] = []

    async def make(**overrides: Any) -> Service:
        app = app_factory(**overrides)
        local = await client_factory(app)
        remote = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=REMOTE_PEER), base_url="http://jobq.test"
        )
        remotes.append(remote)
        service = Service(app, local, remote)
        await service.listening()
        return service

    yield make
    for remote in remotes:
        await remote.aclose()


async def eventually_refused(client: httpx.AsyncClient, key: str) -> float:
    """Seconds until `key` is refused with 401 (fails after NOTIFY_WAIT_SECONDS)."""
    started = time.monotonic()
    while True:
        response = await client.get("/v1/jobs", headers=bearer(key))
        elapsed = time.monotonic() - started
        if response.status_code == 401:
            return elapsed
        assert response.status_code == 200, response.text
        assert elapsed < NOTIFY_WAIT_SECONDS, "the key still works"
        await asyncio.sleep(0.01)


# ---- the route table: every route declares who may call it -------------------------------


ROUTES = sorted(declared_access(create_app()))


def test_every_route_declares_exactly_one_access_rule() -> None:
    table = declared_access(create_app())
    # The table really is the app's (routers unfolded), not an empty or partial one.
    assert {("POST", "/v1/leases"), ("DELETE", "/v1/keys/{name}"), ("GET", "/docs")} <= set(table)
    assert len(table) >= 25
    undeclared = [route for route, need in table.items() if need is None]
    assert undeclared == [], "declare access with a dependency from app/keys/access.py"


def test_the_openapi_document_asks_keyed_operations_for_the_bearer_key() -> None:
    app = create_app()
    spec = app.openapi()
    assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    for (method, path), need in declared_access(app).items():
        operation = spec["paths"].get(path, {}).get(method.lower())
        if operation is None:
            continue  # the OpenAPI document and its viewers are not in it
        security = operation.get("security")
        assert security == (None if need == "public" else [{"apiKey": []}]), (method, path)
        if need != "public":
            assert "401" in operation["responses"], (method, path)
        if need not in ("public", "probe"):
            assert "403" in operation["responses"], (method, path)


def test_a_route_that_declares_nothing_is_caught() -> None:
    app = create_app()

    @app.get("/v1/forgotten")
    async def forgotten() -> dict[str, str]:
        return {}

    assert declared_access(app)[("GET", "/v1/forgotten")] is None


def test_routes_open_without_a_key_take_no_body() -> None:
    # KeyGate refuses bodies without a valid key before reading them: only keyed routes
    # may take one.
    for route in served_routes(create_app()):
        if any(rule.need in ("public", "probe") for rule in access_of(route)):
            assert getattr(route, "body_field", None) is None, route.path


KINDS = (
    "none",
    "malformed",
    "unknown",
    "wrong_secret",
    "revoked",
    "enqueue",
    "work",
    "read",
    "admin",
    "wrong_queue",
)
REFUSED_KINDS = {"none", "malformed", "unknown", "wrong_secret", "revoked"}


# Routes that show a queue-limited key only its queues rather than refusing it.
FILTERED = {("GET", "/v1/queues")}


def expected(need: str, kind: str, route: tuple[str, str]) -> tuple[int, set[str]]:
    """(200 for any 2xx, or the status; the acceptable problem codes)."""
    if need == "public":
        return 200, set()
    if kind in REFUSED_KINDS:
        return 401, {"unauthorized"}
    if need == "probe" or kind in (need, "admin"):
        return 200, set()
    if kind == "wrong_queue" and route in FILTERED:
        return 200, set()
    if kind == "wrong_queue" and need != "admin":  # the scope is right, the queue is not
        return 403, {"forbidden", "lease_forbidden"}
    return 403, {"forbidden"}


@dataclass
class Outcome:
    status: int
    code: str | None

    @classmethod
    def of(cls, response: httpx.Response) -> Outcome:
        if response.status_code < 400:
            return cls(response.status_code, None)
        body = assert_problem(response, response.status_code, response.json()["code"])
        if response.status_code == 401:
            assert response.headers["www-authenticate"].startswith("Bearer"), response.headers
        return cls(response.status_code, body["code"])


@dataclass
class Matrix:
    service: Service
    keys: dict[str, str | None]
    numbers: itertools.count[int] = field(default_factory=itertools.count)

    async def call(self, kind: str, method: str, url: str, **kwargs: Any) -> Outcome:
        response = await self.service.remote.request(
            method, url, headers=bearer(self.keys[kind]), **kwargs
        )
        return Outcome.of(response)

    async def job(self) -> int:
        response = await self.service.remote.post(
            "/v1/queues/q/jobs", json={"type": "t"}, headers=bearer(self.keys["admin"])
        )
        assert response.status_code == 201, response.text
        job_id: int = response.json()["id"]
        return job_id

    async def lease(self, kind: str) -> str:
        """A lease token, taken with `kind`'s key if it may work, else with the admin key."""
        owner = kind if kind in ("work", "admin") else "admin"
        await self.job()
        response = await self.service.remote.post(
            "/v1/leases",
            json={"queues": ["q"], "worker_id": "w"},
            headers=bearer(self.keys[owner]),
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["leases"][0]["lease_id"]
        return token


async def _acks(m: Matrix, kind: str) -> Outcome:
    """The call's status if refused, else what it answered for the one ack."""
    token = await m.lease(kind)
    response = await m.service.remote.post(
        "/v1/acks",
        json={"acks": [{"lease_id": token, "outcome": "complete"}]},
        headers=bearer(m.keys[kind]),
    )
    if response.status_code != 200:
        return Outcome.of(response)
    (result,) = response.json()["results"]
    return Outcome(result["status"], result["code"])


async def _revoke(m: Matrix, kind: str) -> Outcome:
    name = f"victim-{next(m.numbers)}"
    await m.service.auth.create(name, ["read"], None)
    return await m.call(kind, "DELETE", f"/v1/keys/{name}")


async def _get_job(m: Matrix, kind: str) -> Outcome:
    job_id = await m.job()
    return await m.call(kind, "GET", f"/v1/jobs/{job_id}")


async def _on_lease(m: Matrix, kind: str, action: str, body: dict[str, Any]) -> Outcome:
    token = await m.lease(kind)
    return await m.call(kind, "POST", f"/v1/leases/{token}/{action}", json=body)


async def _retry(m: Matrix, kind: str) -> Outcome:
    job_id = await m.job()
    cancelled = await m.service.remote.post(
        f"/v1/jobs/{job_id}/cancel", headers=bearer(m.keys["admin"])
    )
    assert cancelled.status_code == 200, cancelled.text
    return await m.call(kind, "POST", f"/v1/jobs/{job_id}/retry")


async def _on_job(m: Matrix, kind: str, method: str, action: str) -> Outcome:
    job_id = await m.job()
    return await m.call(kind, method, f"/v1/jobs/{job_id}{action}")


Example = Callable[[Matrix, str], Awaitable[Outcome]]
EXAMPLES: dict[tuple[str, str], Example] = {
    ("GET", "/healthz"): lambda m, k: m.call(k, "GET", "/healthz"),
    ("GET", "/readyz"): lambda m, k: m.call(k, "GET", "/readyz"),
    ("GET", "/openapi.json"): lambda m, k: m.call(k, "GET", "/openapi.json"),
    ("GET", "/docs"): lambda m, k: m.call(k, "GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"): lambda m, k: m.call(k, "GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"): lambda m, k: m.call(k, "GET", "/redoc"),
    ("POST", "/v1/queues/{queue}/jobs"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/jobs", json={"type": "t", "payload": {"n": 1}}
    ),
    ("POST", "/v1/queues/{queue}/jobs/batch"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/jobs/batch", json={"jobs": [{"type": "t"}]}
    ),
    ("GET", "/v1/jobs/{job_id}"): _get_job,
    ("GET", "/v1/jobs"): lambda m, k: m.call(k, "GET", "/v1/jobs", params={"queue": "q"}),
    ("POST", "/v1/leases"): lambda m, k: m.call(
        k, "POST", "/v1/leases", json={"queues": ["q"], "worker_id": "w"}
    ),
    ("POST", "/v1/leases/{lease_id}/heartbeat"): lambda m, k: _on_lease(m, k, "heartbeat", {}),
    ("POST", "/v1/leases/{lease_id}/complete"): lambda m, k: _on_lease(m, k, "complete", {}),
    ("POST", "/v1/leases/{lease_id}/fail"): lambda m, k: _on_lease(
        m, k, "fail", {"error": {"type": "E"}}
    ),
    ("POST", "/v1/acks"): _acks,
    ("POST", "/v1/keys"): lambda m, k: m.call(
        k, "POST", "/v1/keys", json={"name": f"new-{next(m.numbers)}", "scopes": ["read"]}
    ),
    ("GET", "/v1/keys"): lambda m, k: m.call(k, "GET", "/v1/keys"),
    ("DELETE", "/v1/keys/{name}"): _revoke,
    ("POST", "/v1/jobs/{job_id}/cancel"): lambda m, k: _on_job(m, k, "POST", "/cancel"),
    ("POST", "/v1/jobs/{job_id}/retry"): _retry,
    ("DELETE", "/v1/jobs/{job_id}"): lambda m, k: _on_job(m, k, "DELETE", ""),
    ("POST", "/v1/queues/{queue}/failed/retry"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/failed/retry", json={}
    ),
    # Other queues than `q`, which the lease examples use.
    ("POST", "/v1/queues/{queue}/pause"): lambda m, k: m.call(k, "POST", "/v1/queues/pq/pause"),
    ("POST", "/v1/queues/{queue}/resume"): lambda m, k: m.call(k, "POST", "/v1/queues/pq/resume"),
    ("GET", "/v1/queues"): lambda m, k: m.call(k, "GET", "/v1/queues"),
    ("GET", "/v1/queues/{queue}"): lambda m, k: m.call(k, "GET", "/v1/queues/q"),
    ("GET", "/metrics"): lambda m, k: m.call(k, "GET", "/metrics"),
    ("GET", "/v1/queues/{queue}/settings"): lambda m, k: m.call(k, "GET", "/v1/queues/q/settings"),
    ("PUT", "/v1/queues/{queue}/settings"): lambda m, k: m.call(
        k, "PUT", "/v1/queues/sq/settings", json={"max_backlog": None}
    ),
    ("POST", "/v1/queues/{queue}/purge"): lambda m, k: m.call(
        k, "POST", "/v1/queues/purged/purge", json={"confirm": "purged"}
    ),
}


@pytest.fixture
async def matrix(service_factory: Callable[..., Awaitable[Service]], database_url: str) -> Matrix:
    keys: dict[str, str | None] = {"none": None, "malformed": "jobq_not-a-key"}
    keys["unknown"] = mint()[0]
    for scope in ("enqueue", "work", "read", "admin"):
        keys[scope] = await create_key(database_url, scope, [scope])
    keys["wrong_queue"] = await create_key(
        database_url, "elsewhere", ["enqueue", "work", "read"], ["elsewhere", "other.*"]
    )
    keys["revoked"] = await create_key(database_url, "gone", ["enqueue", "work", "read"])
    await revoke_key(database_url, "gone")
    admin = keys["admin"]
    assert admin is not None
    keys["wrong_secret"] = admin[: admin.rindex("_") + 1] + secrets.token_urlsafe(32)
    return Matrix(await service_factory(), keys)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_every_route_answers_every_kind_of_key_as_declared(
    matrix: Matrix, method: str, path: str
) -> None:
    need = declared_access(matrix.service.app)[(method, path)]
    assert need is not None, f"{method} {path} declares no access rule (see app/keys/access.py)"
    example = EXAMPLES.get((method, path))
    assert example is not None, f"add an example request for {method} {path} to EXAMPLES"
    wrong = []
    for kind in KINDS:
        outcome = await example(matrix, kind)
        status, codes = expected(need, kind, (method, path))
        ok = 200 <= outcome.status < 300 if status == 200 else outcome.status == status
        if not ok or (codes and outcome.code not in codes):
            wrong.append(f"{kind}: got {outcome.status} {outcome.code}, want {status} {codes}")
    assert wrong == [], f"{method} {path} ({need})"


# ---- 401 and 403 -----------------------------------------------------------------------


async def test_a_missing_or_bad_key_is_401_with_a_bearer_challenge(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    await create_key(database_url, "reader", ["read"])
    service = await service_factory()
    missing = await service.remote.get("/v1/jobs")
    assert_problem(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"] == 'Bearer realm="jobq"'
    for header in ("Bearer jobq_nope", f"Bearer {mint()[0]}", "Basic dXNlcjpwYXNz", "Bearer"):
        response = await service.remote.get("/v1/jobs", headers={"Authorization": header})
        body = assert_problem(response, 401, "unauthorized")
        assert "jobq_" not in body["detail"]  # the key sent is never echoed
        assert response.headers["www-authenticate"].startswith('Bearer realm="jobq"')
    wrong = await service.remote.get("/v1/jobs", headers=bearer(mint()[0]))
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


async def test_a_body_without_a_valid_key_is_refused_before_it_is_read(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    await create_key(database_url, "reader", ["read"])
    service = await service_factory()
    # Not JSON at all: 401, not 400: the key is checked first.
    response = await service.remote.post(
        "/v1/queues/q/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 401, "unauthorized")
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(100):
            sent += 1
            yield b"x" * 65536

    response = await service.remote.post(
        "/v1/queues/q/jobs", content=body(), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 401, "unauthorized")
    assert response.headers["connection"] == "close"
    assert sent <= 1, f"{sent} chunks of an unauthenticated body were read"


# ---- revocation ------------------------------------------------------------------------


async def test_a_revoked_key_stops_working_at_once_on_every_replica(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    admin = await create_key(database_url, "admin", ["admin"])
    key = await create_key(database_url, "reader", ["read"])
    one = await service_factory()
    two = await service_factory(auth_cache_seconds=3600)  # trusts its cache for an hour
    for service in (one, two, two):  # the second call on `two` is served from its cache
        assert (await service.remote.get("/v1/jobs", headers=bearer(key))).status_code == 200
    revoked = await one.remote.delete("/v1/keys/reader", headers=bearer(admin))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    # On the replica that revoked it: the very next request.
    assert_problem(await one.remote.get("/v1/jobs", headers=bearer(key)), 401, "unauthorized")
    # On the other: as soon as the notification arrives, not when its cache expires.
    assert await eventually_refused(two.remote, key) < 1.0


async def test_a_key_revoked_from_the_cli_stops_working_everywhere(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory(auth_cache_seconds=3600)
    assert (await service.remote.get("/v1/jobs", headers=bearer(key))).status_code == 200
    await revoke_key(database_url, "reader")  # another process, straight in the database
    assert await eventually_refused(service.remote, key) < 1.0


async def test_verified_keys_are_cached_and_not_trusted_while_deaf(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory(auth_cache_seconds=3600)
    assert (await service.remote.get("/v1/jobs", headers=bearer(key))).status_code == 200
    # Revoked behind jobq's back (no notification): the cache answers, so it still works...
    await no_keys.execute("UPDATE jobq.api_keys SET revoked_at = now()")
    assert (await service.remote.get("/v1/jobs", headers=bearer(key))).status_code == 200
    # ...but a replica whose LISTEN connection is down asks the database every time.
    service.auth.listening = False
    assert_problem(await service.remote.get("/v1/jobs", headers=bearer(key)), 401, "unauthorized")


async def test_concurrent_requests_share_one_key_lookup(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory()
    repo = service.auth._repo
    lookups = 0
    get_key = repo.get

    async def counted(lookup_id: str) -> Any:
        nonlocal lookups
        lookups += 1
        return await get_key(lookup_id)

    monkeypatch.setattr(repo, "get", counted)
    responses = await asyncio.gather(
        *(service.remote.get("/v1/jobs", headers=bearer(key)) for _ in range(20))
    )
    assert [r.status_code for r in responses] == [200] * 20
    assert lookups == 1


async def test_a_read_from_before_a_revocation_is_not_shared_after_it(
    service_factory: Callable[..., Awaitable[Service]],
) -> None:
    auth = (await service_factory()).auth
    release = asyncio.Event()

    async def before() -> str:
        await release.wait()
        return "read before"

    async def after() -> str:
        return "read after"

    first = asyncio.create_task(auth._read("k", before))
    await asyncio.sleep(0)
    joined = asyncio.create_task(auth._read("k", after))  # shares the read in flight
    await asyncio.sleep(0)
    auth.notified("revoked k")
    assert await auth._read("k", after) == "read after"  # a read of its own
    release.set()
    assert (await first, await joined) == ("read before", "read before")


async def test_last_used_at_is_recorded(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    key = await create_key(database_url, "reader", ["read"])
    service = await service_factory()
    assert await no_keys.fetchval("SELECT last_used_at FROM jobq.api_keys") is None
    assert (await service.remote.get("/v1/jobs", headers=bearer(key))).status_code == 200
    assert await no_keys.fetchval(
        "SELECT last_used_at > now() - interval '1 minute' FROM jobq.api_keys"
    )


# ---- keys at rest ----------------------------------------------------------------------


async def test_keys_are_stored_only_as_digests(
    service_factory: Callable[..., Awaitable[Service]],
    database_url: str,
    no_keys: asyncpg.Connection,
) -> None:
    admin = await create_key(database_url, "admin", ["admin"])
    service = await service_factory()
    created = await service.remote.post(
        "/v1/keys", json={"name": "ingest", "scopes": ["enqueue"]}, headers=bearer(admin)
    )
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    for secret in (admin, key):
        lookup_id, _, part = secret.removeprefix("jobq_").partition("_")
        rows = await no_keys.fetch("SELECT t::text AS row FROM jobq.api_keys t")
        assert len(rows) == 2
        for row in rows:
            assert secret not in row["row"] and part not in row["row"]
            assert part.encode().hex() not in row["row"]
        stored = await no_keys.fetchval(
            "SELECT secret_hash FROM jobq.api_keys WHERE lookup_id = $1", lookup_id
        )
        assert stored == hashlib.sha256(secret.encode()).digest()
    listed = await service.remote.get("/v1/keys", headers=bearer(admin))
    assert key not in listed.text and "secret_hash" not in listed.text
    assert {k["name"] for k in listed.json()["keys"]} == {"admin", "ingest"}


async def test_admin_endpoints_create_list_and_revoke(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    admin = bearer(await create_key(database_url, "admin", ["admin"]))
    service = await service_factory()
    created = await service.remote.post(
        "/v1/keys",
        json={"name": "ingest", "scopes": ["enqueue", "read"], "queues": ["emails", "reports.*"]},
        headers=admin,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["key"].startswith(body["prefix"] + "_") and body["prefix"].startswith("jobq_")
    assert len(body["key"]) >= len("jobq_") + 16 + 1 + 43  # 32 random bytes, base64url
    assert (body["scopes"], body["queues"]) == (["enqueue", "read"], ["emails", "reports.*"])
    again = await service.remote.post(
        "/v1/keys", json={"name": "ingest", "scopes": ["read"]}, headers=admin
    )
    assert_problem(again, 409, "key_exists")
    for bad in (
        {"name": "root", "scopes": ["admin"], "queues": ["emails"]},
        {"name": "x", "scopes": ["superuser"]},
        {"name": "x", "scopes": []},
        {"name": "x", "scopes": ["read"], "queues": ["no spaces"]},
    ):
        response = await service.remote.post("/v1/keys", json=bad, headers=admin)
        assert_problem(response, 422, "validation_error")
    first = await service.remote.delete("/v1/keys/ingest", headers=admin)
    second = await service.remote.delete("/v1/keys/ingest", headers=admin)
    assert first.status_code == second.status_code == 200
    assert first.json()["revoked_at"] == second.json()["revoked_at"] is not None
    assert_problem(
        await service.remote.delete("/v1/keys/nobody", headers=admin), 404, "key_not_found"
    )
    listed = {
        k["name"]: k for k in (await service.remote.get("/v1/keys", headers=admin)).json()["keys"]
    }
    assert listed["ingest"]["revoked_at"] is not None and listed["admin"]["revoked_at"] is None
    used = await service.remote.get("/v1/jobs", headers=bearer(body["key"]))
    assert_problem(used, 401, "unauthorized")


# ---- leases belong to their key ---------------------------------------------------------


async def test_a_lease_is_bound_to_the_key_that_took_it(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    mine = bearer(await create_key(database_url, "mine", ["work"]))
    theirs = bearer(await create_key(database_url, "theirs", ["work"]))
    admin = bearer(await create_key(database_url, "admin", ["admin"]))
    service = await service_factory()
    client = service.remote
    await client.post("/v1/queues/q/jobs", json={"type": "t"}, headers=admin)
    leased = await client.post("/v1/leases", json={"queues": ["q"], "worker_id": "w"}, headers=mine)
    token = leased.json()["leases"][0]["lease_id"]
    for other in (theirs, admin):  # admin may do everything, but not take over a lease
        for action, body in (
            ("heartbeat", {}),
            ("complete", {}),
            ("fail", {"error": {"type": "E"}}),
        ):
            response = await client.post(f"/v1/leases/{token}/{action}", json=body, headers=other)
            problem = assert_problem(response, 403, "lease_forbidden")
            assert "job_id" not in problem and "state" not in problem
        acks = await client.post(
            "/v1/acks", json={"acks": [{"lease_id": token, "outcome": "complete"}]}, headers=other
        )
        assert acks.json()["results"] == [
            {
                "lease_id": token,
                "status": 403,
                "code": "lease_forbidden",
                "job_id": None,
                "state": None,
            }
        ]
    job = (await client.get("/v1/jobs?queue=q", headers=admin)).json()["jobs"][0]
    assert (job["state"], job["progress"], job["attempts"]) == ("running", None, [])
    done = await client.post(f"/v1/leases/{token}/complete", json={"result": 1}, headers=mine)
    assert done.status_code == 200 and done.json()["state"] == "succeeded"
    # A repeat is 200 with the job for its key only; another key learns nothing.
    assert (await client.post(f"/v1/leases/{token}/complete", headers=mine)).status_code == 200
    repeat = await client.post(f"/v1/leases/{token}/complete", headers=theirs)
    assert_problem(repeat, 403, "lease_forbidden")


async def test_a_superseded_lease_stays_its_keys(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    first = bearer(await create_key(database_url, "first", ["work", "enqueue"]))
    second = bearer(await create_key(database_url, "second", ["work"]))
    service = await service_factory()
    client = service.remote
    await client.post("/v1/queues/q/jobs", json={"type": "t"}, headers=first)
    lease = {"queues": ["q"], "worker_id": "w"}
    old = (await client.post("/v1/leases", json=lease, headers=first)).json()["leases"][0]
    failed = await client.post(
        f"/v1/leases/{old['lease_id']}/fail",
        json={"error": {"type": "E"}, "retry_after_seconds": 0},
        headers=first,
    )
    assert failed.status_code == 200
    new = (await client.post("/v1/leases", json=lease, headers=second)).json()["leases"][0]
    # The old lease is the first key's: a repeat of its failure is 200 for it, 403 for the
    # second key, which holds the job now.
    body = {"error": {"type": "E"}}
    url = f"/v1/leases/{old['lease_id']}/fail"
    assert (await client.post(url, json=body, headers=first)).status_code == 200
    assert_problem(await client.post(url, json=body, headers=second), 403, "lease_forbidden")
    stale = await client.post(f"/v1/leases/{new['lease_id']}/heartbeat", headers=first)
    assert_problem(stale, 403, "lease_forbidden")
    assert (
        await client.post(f"/v1/leases/{new['lease_id']}/heartbeat", headers=second)
    ).status_code == 200


# ---- queues a key may touch -------------------------------------------------------------


def test_queue_rules_match_names_and_patterns() -> None:
    rule = QueueRule(("emails", "reports.*", "team_a.*"))
    for queue in ("emails", "reports.", "reports.daily", "reports.daily.eu", "team_a.x"):
        assert rule.allows(queue), queue
    for queue in ("emails2", "reports", "reportsX", "xreports.daily", "teamXa.x", "Emails"):
        assert not rule.allows(queue), queue
    assert rule.sql() == (["emails"], ["reports.%", "team\\_a.%"])
    assert QueueRule(("*",)).allows("anything") and not QueueRule(()).allows("q")


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


# ---- open mode, and refusing to serve the network openly --------------------------------


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


def test_auth_setting_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_AUTH", "disabled")
    assert Settings().auth == "disabled"
    monkeypatch.setenv("JOBQ_AUTH", "off")
    with pytest.raises(ValueError, match="auto"):
        Settings()


# ---- logs ------------------------------------------------------------------------------


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
    secrets_ += [key.rsplit("_", 1)[1] for key in (admin, worker, new_key)]
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
    assert replay.json() == {"id": first.json()["id"], "state": "queued", "deduplicated": True}
    # A key that may read the queue gets the whole job, as before; a new job is whole too.
    again = await service.remote.post("/v1/queues/q-idem/jobs", json=body, headers=bearer(other))
    assert (again.status_code, again.json()["payload"]) == (200, {"secret": "s-31"})
    fresh = await service.remote.post(
        "/v1/queues/q-idem/jobs", json={"type": "report", "idempotency_key": "report-2"},
        headers=bearer(ingest),
    )  # fmt: skip
    assert fresh.status_code == 201 and fresh.json()["payload"] is None
