"""`GET /v1/events` over real HTTP (uvicorn in the test's loop): job and queue events as
they happen, resumable with `Last-Event-ID` within retention, filtered, limited to the
queues a key may read, kept open by heartbeats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from jobq_client import AsyncClient, EventsExpired
from tests.helpers import assert_problem, bearer, create_key, served
from tests.sse import frames, take

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

TIMEOUT = httpx.Timeout(30)


@pytest.fixture
async def service(app_factory: Callable[..., FastAPI]) -> AsyncIterator[str]:
    """The app, with quick heartbeats, served over HTTP; its base URL."""
    async with served(app_factory(event_heartbeat_seconds=0.3)) as url:
        yield url


@pytest.fixture
async def http(service: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service, timeout=TIMEOUT) as client:
        yield client


async def _enqueue(http: httpx.AsyncClient, queue: str, type_: str = "task") -> int:
    response = await http.post(f"/v1/queues/{queue}/jobs", json={"type": type_})
    assert response.status_code == 201, response.text
    job_id: int = response.json()["id"]
    return job_id


async def test_events_arrive_as_they_happen_in_order(http: httpx.AsyncClient) -> None:
    async with http.stream("GET", "/v1/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        first = await _enqueue(http, "mail", "welcome")
        pause = await http.post("/v1/queues/mail/pause")
        assert pause.status_code == 200
        got = await asyncio.wait_for(take(response, 2), 10)
    assert [(f.event, f.data["kind"], f.data["job_id"]) for f in got] == [
        ("enqueued", "enqueued", first),
        ("queue_paused", "queue_paused", None),
    ]
    event = got[0].data
    assert set(event) == {"id", "kind", "at", "queue", "job_id", "type", "attempt"}
    assert (event["queue"], event["type"], event["attempt"]) == ("mail", "welcome", 0)
    assert got[1].id == str(int(got[0].id or 0) + 1) == str(got[1].data["id"])


async def test_a_client_resumes_after_its_last_event_id(http: httpx.AsyncClient) -> None:
    async with http.stream("GET", "/v1/events") as response:
        first = await _enqueue(http, "mail")
        (seen,) = await asyncio.wait_for(take(response, 1), 10)
    missed = [await _enqueue(http, "mail") for _ in range(3)]
    headers = {"Last-Event-ID": str(seen.id)}
    async with http.stream("GET", "/v1/events", headers=headers) as response:
        assert response.status_code == 200
        got = await asyncio.wait_for(take(response, 3), 10)
    assert seen.data["job_id"] == first
    assert [f.data["job_id"] for f in got] == missed
    after = await http.get("/v1/events", params={"after": "999999"})  # another jobq's id
    assert_problem(after, 410, "events_expired")


async def test_an_id_older_than_retention_is_refused(
    http: httpx.AsyncClient, db: asyncpg.Connection, app_factory: Callable[..., FastAPI]
) -> None:
    async with http.stream("GET", "/v1/events") as response:
        for _ in range(3):
            await _enqueue(http, "mail")
        await asyncio.wait_for(take(response, 3), 10)
    await db.execute("DELETE FROM jobq.job_events WHERE position < 3")  # as retention does
    refused = await http.get("/v1/events", headers={"Last-Event-ID": "1"})
    body = assert_problem(refused, 410, "events_expired")
    assert "no longer kept" in body["detail"]
    async with http.stream("GET", "/v1/events", headers={"Last-Event-ID": "2"}) as response:
        assert response.status_code == 200  # nothing after 2 was pruned
    malformed = await http.get("/v1/events", headers={"Last-Event-ID": "x1"})
    assert_problem(malformed, 422, "validation_error")


async def test_filters_and_heartbeats(http: httpx.AsyncClient) -> None:
    params: dict[str, Any] = {"queue": ["mail", "sms"], "type": "welcome", "kind": "enqueued"}
    async with http.stream("GET", "/v1/events", params=params) as response:
        await _enqueue(http, "other", "welcome")
        await _enqueue(http, "mail", "reminder")
        wanted = await _enqueue(http, "sms", "welcome")
        await http.post("/v1/queues/mail/pause")
        seen = []
        async for frame in frames(response):
            seen.append(frame)
            if frame.comment == "keepalive" and any(f.data for f in seen):
                break
    events = [f.data for f in seen if f.data is not None]
    assert [(e["queue"], e["job_id"]) for e in events] == [("sms", wanted)]
    # the heartbeat carries the position read up to, past the events filtered out
    assert seen[-1].id is not None and int(seen[-1].id) >= 4


async def test_a_stream_ends_after_its_lifetime_with_its_position(
    app_factory: Callable[..., FastAPI],
) -> None:
    app = app_factory(event_stream_seconds=0.5, event_heartbeat_seconds=60)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        async with http.stream("GET", "/v1/events") as response:
            wanted = await _enqueue(http, "mail")
            seen = await asyncio.wait_for(_all(response), 10)  # the server ends it
        events = [f.data for f in seen if f.data is not None]
        assert [e["job_id"] for e in events] == [wanted]
        # its last frame is the position to resume from (no heartbeat was due)
        assert seen[-1].data is None and seen[-1].id == str(events[0]["id"])


async def _all(response: httpx.Response) -> list[Any]:
    return [frame async for frame in frames(response)]


async def test_a_key_sees_only_the_queues_it_may_read(
    http: httpx.AsyncClient, database_url: str, no_keys: asyncpg.Connection
) -> None:
    del no_keys
    admin = bearer(await create_key(database_url, "ops", ["admin"]))
    reader = bearer(await create_key(database_url, "mail-reader", ["read"], ["mail*"]))
    worker = bearer(await create_key(database_url, "worker", ["work"]))
    async with http.stream("GET", "/v1/events", headers=reader) as response:
        assert response.status_code == 200
        for queue in ("sms", "mail-eu", "sms"):
            await http.post(f"/v1/queues/{queue}/jobs", json={"type": "t"}, headers=admin)
        (only,) = await asyncio.wait_for(take(response, 1), 10)
    assert only.data["queue"] == "mail-eu"
    other = await http.get("/v1/events", params={"queue": "sms"}, headers=reader)
    assert_problem(other, 403, "forbidden")
    assert_problem(await http.get("/v1/events", headers=worker), 403, "forbidden")
    assert_problem(await http.get("/v1/events"), 401, "unauthorized")


async def test_the_python_sdk_iterates_and_resumes(http: httpx.AsyncClient, service: str) -> None:
    async with AsyncClient(service) as jobq:
        stream = jobq.events(queues=["mail"])
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.5)  # the stream is open: it follows from now
        job = await _enqueue(http, "mail")
        event = await asyncio.wait_for(first, 10)
        await stream.aclose()
        assert (event.kind, event.job_id, event.queue) == ("enqueued", job, "mail")
        later = await _enqueue(http, "mail")
        resumed = jobq.events(last_event_id=event.id)
        again = await asyncio.wait_for(anext(resumed), 10)
        await resumed.aclose()
        assert (again.id, again.job_id) == (event.id + 1, later)
        with pytest.raises(EventsExpired):
            await anext(jobq.events(last_event_id=10**9))
