"""Long-poll leasing: waiting requests wake on announcements, timers, or a fallback poll."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.db import listener
from app.db.listener import APPLICATION_NAME
from app.jobs.repository import JobsRepository
from app.jobs.wakeups import Wakeups
from tests.helpers import enqueue, lease

WAIT = {"wait_seconds": 5}


async def _until(app: FastAPI, state: str, up: bool) -> None:
    """Until the app's wakeups are `listening` (the connection) or `hearing` (due jobs)."""
    wakeups: Wakeups = app.state.services.wakeups
    for _ in range(200):
        if getattr(wakeups, state) is up:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {state} {up}")


async def _listening(app: FastAPI, up: bool = True) -> None:
    await _until(app, "listening", up)


async def _terminate_listener(db: asyncpg.Connection) -> None:
    """Close the listener's connection from the server's side, as a restart would."""
    await db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = $1 AND datname = current_database()",
        APPLICATION_NAME,
    )


async def _timed_lease(
    client: httpx.AsyncClient, *queues: str, **extra: Any
) -> tuple[list[Any], float]:
    started = time.monotonic()
    leased = await lease(client, *queues, **extra)
    return leased, time.monotonic() - started


async def _slow_client(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any], **settings: Any
) -> tuple[FastAPI, httpx.AsyncClient]:
    """An app whose own re-checks are too rare to explain a quick wake-up."""
    app = app_factory(longpoll_recheck_seconds=30, longpoll_poll_seconds=30, **settings)
    client: httpx.AsyncClient = await client_factory(app)
    await _listening(app)
    return app, client


async def test_a_due_job_is_leased_without_waiting(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    leased, elapsed = await _timed_lease(client, **WAIT)
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert elapsed < 1


async def test_nothing_due_answers_empty_after_the_wait(client: httpx.AsyncClient) -> None:
    leased, elapsed = await _timed_lease(client, wait_seconds=0.5)
    assert leased == [] and 0.45 < elapsed < 3


async def test_an_enqueue_wakes_a_waiting_lease(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    _, client = await _slow_client(app_factory, client_factory)
    waiting = asyncio.create_task(_timed_lease(client, "mail", **WAIT))
    await asyncio.sleep(0.3)
    job = await enqueue(client, "mail")
    leased, elapsed = await waiting
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert 0.3 <= elapsed < 2


async def test_an_enqueue_by_another_process_wakes_the_waiter(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    _, waiter = await _slow_client(app_factory, client_factory)
    _, producer = await _slow_client(app_factory, client_factory)
    waiting = asyncio.create_task(_timed_lease(waiter, "mail", **WAIT))
    await asyncio.sleep(0.3)
    batch = await producer.post("/v1/queues/mail/jobs/batch", json={"jobs": [{"type": "t"}] * 3})
    assert batch.status_code == 201
    leased, elapsed = await waiting
    assert len(leased) == 1 and elapsed < 2


async def test_other_queues_do_not_wake_the_waiter(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    _, client = await _slow_client(app_factory, client_factory)
    waiting = asyncio.create_task(_timed_lease(client, "mail", wait_seconds=1))
    await asyncio.sleep(0.2)
    await enqueue(client, "other")
    leased, elapsed = await waiting
    assert leased == [] and elapsed >= 0.95


async def test_a_delayed_job_wakes_the_waiter_when_it_falls_due(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    _, client = await _slow_client(app_factory, client_factory)
    job = await enqueue(client, "mail", delay_seconds=1.0)
    leased, elapsed = await _timed_lease(client, "mail", **WAIT)
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert 0.9 < elapsed < 2.5


async def test_a_retry_wakes_the_waiter_when_it_falls_due(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    _, client = await _slow_client(app_factory, client_factory)
    job = await enqueue(client, "mail")
    (held,) = await lease(client, "mail")
    failed = await client.post(
        f"/v1/leases/{held['lease_id']}/fail",
        json={"error": {"type": "E"}, "retry_after_seconds": 1},
    )
    assert failed.json()["state"] == "queued"
    leased, elapsed = await _timed_lease(client, "mail", **WAIT)
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert 0.8 < elapsed < 2.5


async def test_waiting_requests_hold_no_database_connection(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    app, client = await _slow_client(app_factory, client_factory)
    waiting = [
        asyncio.create_task(lease(client, "mail", worker=f"w{n}", wait_seconds=10))
        for n in range(20)
    ]
    # Each makes one claim, finds nothing, and waits: its connection goes back to the pool.
    pool = app.state.services.engine.pool
    deadline = asyncio.get_running_loop().time() + 5
    while pool.checkedout() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    assert pool.checkedout() == 0
    assert not any(task.done() for task in waiting)  # all 20 still waiting
    await client.post("/v1/queues/mail/jobs/batch", json={"jobs": [{"type": "t"}] * 20})
    leased = [item["job"]["id"] for got in await asyncio.gather(*waiting) for item in got]
    assert len(leased) == len(set(leased)) == 20


async def test_without_the_listener_waiters_fall_back_to_polling(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
) -> None:
    app = app_factory(longpoll_recheck_seconds=30, longpoll_poll_seconds=0.2)
    client: httpx.AsyncClient = await client_factory(app)
    await _listening(app)
    await _terminate_listener(db)
    await _listening(app, up=False)
    waiting = asyncio.create_task(_timed_lease(client, "mail", **WAIT))
    await asyncio.sleep(0.3)
    # a row no statement of jobq announced: only a re-check can find it
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " VALUES ('mail', 't', 'null', 1, 60)"
    )
    leased, elapsed = await waiting
    assert len(leased) == 1 and elapsed < 2
    await _listening(app)  # and the listener comes back by itself


async def test_the_listener_knows_at_once_when_the_server_closes_its_connection(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no keepalive query within the test: only the closed socket can tell the listener
    monkeypatch.setattr(listener, "KEEPALIVE_SECONDS", 600.0)
    app = app_factory()
    await client_factory(app)
    await _listening(app)
    await _terminate_listener(db)
    await _listening(app, up=False)
    await _listening(app)  # and it reconnects after its first backoff


async def test_a_caller_that_went_away_is_handed_nothing(
    client: httpx.AsyncClient, app: FastAPI, db: asyncpg.Connection
) -> None:
    from app.jobs.service import Wanted

    service = app.state.services.jobs.leases
    wanted = Wanted(["mail"], [], max_jobs=1, lease_seconds=None, wait_seconds=5, worker_id="gone")

    async def gone() -> bool:
        return True

    waiting = asyncio.create_task(service.lease(wanted, abandoned=gone))
    await asyncio.sleep(0.2)
    await enqueue(client, "mail")
    assert (await waiting).leases == []
    assert await db.fetchval("SELECT state::text FROM jobq.jobs") == "queued"


async def test_shutdown_releases_waiting_requests(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    app, client = await _slow_client(app_factory, client_factory)
    waiting = asyncio.create_task(_timed_lease(client, "mail", wait_seconds=20))
    await asyncio.sleep(0.3)
    app.state.services.wakeups.close_threadsafe()
    leased, elapsed = await waiting
    assert leased == [] and elapsed < 2


async def test_a_process_hears_due_jobs_only_while_leases_wait(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    app, client = await _slow_client(app_factory, client_factory)
    app.state.services.wakeups.linger_seconds = 0.3
    job = await enqueue(client, "mail")
    (held,) = await lease(client, "mail")  # found at once: nothing to hear
    assert held["job"]["id"] == job["id"] and not app.state.services.wakeups.hearing
    waiting = asyncio.create_task(_timed_lease(client, "mail", **WAIT))
    await _until(app, "hearing", True)
    later = await enqueue(client, "mail")
    leased, elapsed = await waiting
    assert [item["job"]["id"] for item in leased] == [later["id"]] and elapsed < 2
    await _until(app, "hearing", False)  # the linger after the last wait


async def test_a_retry_heard_before_a_pause_in_hearing_wakes_a_later_waiter(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    """The retry's due time reaches the process twice: announced with its count while the
    process hears, and looked up (count unknown) when it begins to hear again. Once, the
    two made the lease answer 500 (CI's soak)."""
    app, client = await _slow_client(app_factory, client_factory)
    app.state.services.wakeups.linger_seconds = 0.3
    job = await enqueue(client, "mail")
    (held,) = await lease(client, "mail")
    elsewhere = asyncio.create_task(lease(client, "other", wait_seconds=1))
    await _until(app, "hearing", True)
    failed = await client.post(
        f"/v1/leases/{held['lease_id']}/fail",
        json={"error": {"type": "E"}, "retry_after_seconds": 2.5},
    )
    assert failed.json()["state"] == "queued"  # announced: due in 2.5 s, one job
    assert await elsewhere == []
    await _until(app, "hearing", False)  # the linger after the last wait
    leased, elapsed = await _timed_lease(client, "mail", **WAIT)  # begins to hear again
    assert [item["job"]["id"] for item in leased] == [job["id"]]
    assert elapsed < 2.5


async def test_a_job_announced_before_the_process_heard_is_leased_at_once(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    """Enqueued after the lease's empty look, before its LISTEN: the lease looks again."""
    app, client = await _slow_client(app_factory, client_factory)
    wakeups: Wakeups = app.state.services.wakeups
    enqueued: list[dict[str, Any]] = []

    async def enqueue_then_hear() -> None:
        enqueued.append(await enqueue(client, "mail"))
        app.state.services.listener.hear_due(True)

    def hear_late(wanted: bool) -> None:
        if not wanted:
            app.state.services.listener.hear_due(False)
        else:
            hearing.append(asyncio.create_task(enqueue_then_hear()))

    hearing: list[asyncio.Task[None]] = []
    wakeups.hear_with(hear_late, JobsRepository(app.state.services.db).next_due)
    leased, elapsed = await _timed_lease(client, "mail", **WAIT)
    assert [item["job"]["id"] for item in leased] == [enqueued[0]["id"]]
    assert elapsed < 2  # not the wait's end, nor a re-check (30 s)


async def test_a_job_another_process_delayed_before_this_one_waited_wakes_it_when_due(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    app, waiter = await _slow_client(app_factory, client_factory)
    _, producer = await _slow_client(app_factory, client_factory)
    low = await enqueue(producer, "mail", delay_seconds=1.0, priority=-5)
    await enqueue(producer, "mail", delay_seconds=60, priority=5)  # a later one, on top
    assert not app.state.services.wakeups.hearing
    leased, elapsed = await _timed_lease(waiter, "mail", **WAIT)
    assert [item["job"]["id"] for item in leased] == [low["id"]]
    assert 0.9 < elapsed < 2.5
