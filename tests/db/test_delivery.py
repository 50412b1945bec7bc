"""The shared delivery pieces against real PostgreSQL and a real loopback endpoint:
the circuit breaker's rows (`jobq.delivery_breakers`, migration 0024) as several
connections see them, and `send`'s outcomes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from app import __version__
from app.db.database import Database
from app.db.engine import create_engine
from app.db.migrate import upgrade
from app.delivery import (
    Allowlist,
    Attempt,
    Breakers,
    DeliveryRepository,
    Secrets,
    create_transport,
    new_secret,
    send,
    sign,
)
from tests.conftest import _drop, _recreate, plain
from tests.db.test_migration_0016 import downgrade
from tests.delivery_endpoint import Answer, Endpoint, Received, serving

LOOPBACK = Allowlist.parse(["http://127.0.0.1:*"])


@pytest.fixture
async def database(database_url: str, db: asyncpg.Connection) -> AsyncIterator[Database]:
    engine = create_engine(database_url, 4)
    yield Database(engine)
    await engine.dispose()


def _breakers(database: Database, failures: int = 3) -> Breakers:
    return Breakers(
        DeliveryRepository(database),
        failures=failures,
        pause_seconds=0.2,
        max_pause_seconds=0.5,
    )


async def test_migration_0024_goes_down_and_up_again(server_url: str) -> None:
    name = f"jobq_migration_0024_{os.getpid()}"
    url = await _recreate(server_url, name)
    conn = await asyncpg.connect(plain(url))
    exists = "SELECT to_regclass('jobq.delivery_breakers') IS NOT NULL"
    try:
        assert await conn.fetchval(exists)
        await downgrade(url, "0023")
        assert not await conn.fetchval(exists)
        await upgrade(url)
        assert await conn.fetchval(exists)
    finally:
        await conn.close()
        await _drop(server_url, name)


async def test_consecutive_failures_open_the_breaker_for_a_growing_pause(
    database: Database, db: asyncpg.Connection
) -> None:
    breakers = _breakers(database)
    for _ in range(2):
        state = await breakers.record("queue:a", False, error="5xx: boom")
        assert state is not None and not state.open
    state = await breakers.record("queue:a", False, error="timeout")
    assert state is not None and state.open and state.trips == 1
    first = state.open_until
    assert first is not None and state.last_error == "timeout"
    # failures while open do not push the pause further
    state = await breakers.record("queue:a", False)
    assert state is not None and state.open_until == first and state.trips == 1
    await asyncio.sleep(0.25)
    assert (await breakers.states(["queue:a"]))["queue:a"].state == "half_open"
    # the pause is over: one more failure opens it again, for twice as long
    state = await breakers.record("queue:a", False)
    assert state is not None and state.open and state.trips == 2
    assert state.open_until is not None and state.failed_at is not None
    assert (state.open_until - state.failed_at).total_seconds() == pytest.approx(0.4, abs=0.01)
    # a success closes it and forgets the trips
    assert await breakers.record("queue:a", True) is None
    assert (await breakers.states(["queue:a"]))["queue:a"].state == "closed"
    row = await db.fetchrow("SELECT * FROM jobq.delivery_breakers WHERE target = 'queue:a'")
    assert row is not None and (row["failures"], row["trips"], row["open_until"]) == (0, 0, None)


async def test_the_pause_stops_growing_at_its_maximum(database: Database) -> None:
    breakers = _breakers(database, failures=1)
    for trips in range(1, 5):
        state = await breakers.record("queue:b", False)
        assert state is not None and state.trips == trips
        assert state.open_until is not None and state.failed_at is not None
        pause = (state.open_until - state.failed_at).total_seconds()
        assert pause == pytest.approx(min(0.5, 0.2 * 2 ** (trips - 1)), abs=0.01)
        await asyncio.sleep(pause + 0.02)


async def test_every_connection_sees_a_breaker_one_opened_and_a_reset_closes_it(
    database_url: str, database: Database
) -> None:
    other_engine = create_engine(database_url, 1)
    try:
        other = _breakers(Database(other_engine))
        # concurrent failures from two pools: counted each, opened once
        await asyncio.gather(
            *(b.record("queue:c", False) for b in (_breakers(database), other) for _ in range(3))
        )
        state = (await other.states(["queue:c", "queue:never"]))["queue:c"]
        assert state.open and state.failures == 6 and state.trips == 1
        assert (await other.states(["queue:never"]))["queue:never"].state == "closed"
        reset = await _breakers(database).reset("queue:c")
        assert reset.state == "closed"
        assert not (await other.states(["queue:c"]))["queue:c"].open
        assert (await other.reset("queue:never")).state == "closed"
    finally:
        await other_engine.dispose()


async def test_send_reports_each_kind_of_answer() -> None:
    async with (
        serving(Endpoint(hang_seconds=5)) as endpoint,
        create_transport(max_connections=4) as transport,
    ):

        async def post(path: str, timeout: float = 2.0) -> Attempt:
            return await send(
                transport, LOOPBACK, endpoint.base + path, b"{}", {}, timeout_seconds=timeout
            )

        ok = await post("/ok")
        assert ok.ok and ok.status == 200 and ok.body == b'{"echo": true}'
        busy = await post("/busy")
        assert busy.status == 429 and busy.retry_after() == 1.0
        error = await post("/error")
        assert error.status_class == "5xx" and len(error.excerpt()) == 512
        redirect = await post("/redirect")
        assert redirect.status == 307
        assert [r.path for r in endpoint.requests].count("/ok") == 1  # not followed
        hang = await post("/hang", timeout=0.3)
        assert hang.failure == "timeout" and hang.status is None
        assert hang.seconds < 1.5
        closed = await post("/close")
        assert closed.failure == "connection"


async def test_send_refuses_what_the_allowlist_refuses_without_connecting() -> None:
    async with serving(Endpoint()) as endpoint, create_transport(max_connections=1) as transport:
        refused = await send(
            transport,
            Allowlist.parse(["http://*:*"]),  # loopback not named
            endpoint.base + "/ok",
            b"{}",
            {},
            timeout_seconds=1,
        )
    assert refused.failure == "refused" and "not a public address" in refused.detail
    assert endpoint.requests == []


async def test_a_named_host_is_sent_by_name_to_the_address_checked() -> None:
    async with serving(Endpoint()) as endpoint, create_transport(max_connections=1) as transport:
        url = f"http://localhost:{endpoint.port}/ok"
        allowed = Allowlist.parse(["http://localhost:*"])
        attempt = await send(transport, allowed, url, b"{}", {}, timeout_seconds=2)
    assert attempt.status == 200
    (received,) = endpoint.received("/ok")
    assert received.headers["host"] == f"localhost:{endpoint.port}"


async def test_no_cookie_an_endpoint_sets_is_sent_back() -> None:
    def baking(_got: Received) -> Answer:
        return 200, {"set-cookie": "session=abc; Path=/"}, b"{}"

    async with (
        serving(Endpoint(extra={"/bake": baking})) as endpoint,
        create_transport(max_connections=1) as transport,
    ):
        for _ in range(2):
            attempt = await send(
                transport, LOOPBACK, endpoint.base + "/bake", b"{}", {}, timeout_seconds=2
            )
            assert attempt.status == 200
    assert [r.headers.get("cookie") for r in endpoint.received("/bake")] == [None, None]


async def test_a_signed_request_verifies_at_the_endpoint_with_either_secret() -> None:
    old, new = new_secret(), new_secret()
    async with (
        serving(Endpoint(secrets=[old])) as endpoint,
        create_transport(max_connections=1) as transport,
    ):
        body = '{"job": 1}'
        headers = sign(Secrets([new, old]), "msg-1", body)
        attempt = await send(
            transport,
            LOOPBACK,
            endpoint.base + "/verify",
            body.encode(),
            headers,
            timeout_seconds=2,
        )
        assert attempt.status == 200
        received = endpoint.received("/verify")[0]
        assert received.headers["host"] == f"127.0.0.1:{endpoint.port}"
        assert received.headers["content-type"] == "application/json"
        assert received.headers["user-agent"] == f"jobq/{__version__}"
        assert int(received.headers["webhook-timestamp"]) == pytest.approx(
            datetime.now(UTC).timestamp(), abs=5
        )
