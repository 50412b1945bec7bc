"""API keys at work: refused keys, revocation on every replica, the cache, digests at rest,
the admin endpoints, and leases bound to the key that took them."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from app.keys import (
    mint,
)
from tests.api.auth_support import Service, eventually_refused
from tests.helpers import assert_problem, bearer, create_key, revoke_key

pytestmark = [
    pytest.mark.usefixtures("no_keys"),
    pytest.mark.pgbouncer,  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py
]


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


async def test_the_access_rule_is_judged_before_the_parameters(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    # A refused caller learns nothing of what the route would have validated.
    producer = await create_key(database_url, "producer", ["enqueue"])
    service = await service_factory()
    no_key = await service.remote.get("/v1/jobs", params={"limit": "many", "state": "nope"})
    assert_problem(no_key, 401, "unauthorized")
    wrong_scope = await service.remote.post(
        "/v1/leases", json={"queues": [], "max_jobs": "x"}, headers=bearer(producer)
    )
    assert_problem(wrong_scope, 403, "forbidden")
    not_json = await service.remote.post(
        "/v1/leases",
        content=b"{not json",
        headers={**bearer(producer), "Content-Type": "application/json"},
    )
    assert_problem(not_json, 403, "forbidden")
    # With the scope, the same parameters are judged.
    worker = await create_key(database_url, "worker", ["work"])
    invalid = await service.remote.post(
        "/v1/leases", json={"queues": [], "max_jobs": "x"}, headers=bearer(worker)
    )
    assert invalid.status_code in (400, 422)


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
