"""The job-event outbox: every job and queue change leaves its event in the change's
transaction (none for a rolled-back one), and events are numbered in commit order, so a
reader resuming after a position misses none that commits late."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.events import EventsPruner, Stamper
from tests.conftest import plain
from tests.helpers import enqueue, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

EVENTS = "SELECT position, kind::text, queue, job_id, type, attempt FROM jobq.job_events"


async def stamped(app: FastAPI) -> None:
    """Until every committed event has its position (the stamper also runs on its own)."""
    stamper: Stamper = app.state.services.stamper
    for _ in range(200):
        await stamper.run_once()
        if not await _unstamped(app):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("events stayed unstamped")


async def _unstamped(app: FastAPI) -> int:
    async with app.state.services.db.connection() as conn:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM jobq.job_events WHERE position IS NULL"
        )
        return count


async def events(app: FastAPI, db: asyncpg.Connection) -> list[tuple[Any, ...]]:
    await stamped(app)
    rows = await db.fetch(f"{EVENTS} WHERE position IS NOT NULL ORDER BY position")
    return [tuple(r)[1:] for r in rows]


async def test_each_state_change_leaves_one_event_in_order(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    first = await enqueue(client, "mail", type="welcome", max_attempts=2)
    leased = await lease_one(client, "mail")
    heartbeat = await client.post(f"/v1/leases/{leased['lease_id']}/heartbeat", json={})
    assert heartbeat.status_code == 200, heartbeat.text  # no state change: no event
    failed = await client.post(
        f"/v1/leases/{leased['lease_id']}/fail",
        json={"error": {"type": "Boom"}, "retry_after_seconds": 0},
    )
    assert failed.status_code == 200, failed.text
    again = await lease_one(client, "mail")
    done = await client.post(f"/v1/leases/{again['lease_id']}/complete", json={"result": 1})
    assert done.status_code == 200, done.text
    second = await enqueue(client, "mail", type="welcome")
    cancelled = await client.post(f"/v1/jobs/{second['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    one, two = first["id"], second["id"]
    assert await events(app, db) == [
        ("enqueued", "mail", one, "welcome", 0),
        ("started", "mail", one, "welcome", 1),
        ("retrying", "mail", one, "welcome", 1),
        ("started", "mail", one, "welcome", 2),
        ("succeeded", "mail", one, "welcome", 2),
        ("enqueued", "mail", two, "welcome", 0),
        ("cancelled", "mail", two, "welcome", 0),
    ]


async def test_queue_changes_are_events_of_their_own(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    for path in ("pause", "pause", "resume", "resume"):  # again: no change, no event
        response = await client.post(f"/v1/queues/mail/{path}")
        assert response.status_code == 200, response.text
    settings = await client.put("/v1/queues/mail/settings", json={"max_running": 3})
    assert settings.status_code == 200, settings.text
    fresh = await client.put("/v1/queues/sms/settings", json={"max_attempts": 2})
    assert fresh.status_code == 200, fresh.text
    assert await events(app, db) == [
        ("queue_paused", "mail", None, None, None),
        ("queue_resumed", "mail", None, None, None),
        ("queue_settings", "mail", None, None, None),
        ("queue_settings", "sms", None, None, None),
    ]


async def test_a_rolled_back_change_leaves_no_event(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    async with db.transaction():
        await db.fetch("SELECT * FROM jobq.enqueue('mail', 'kept')")
    with pytest.raises(RuntimeError):
        async with db.transaction():
            await db.fetch("SELECT * FROM jobq.enqueue('mail', 'undone')")
            await db.execute("UPDATE jobq.queues SET max_running = 1")
            await db.execute("INSERT INTO jobq.queues (name, paused) VALUES ('undone', true)")
            raise RuntimeError("roll back")
    assert [(kind, type_) for kind, _, _, type_, _ in await events(app, db)] == [
        ("enqueued", "kept")
    ]


async def test_positions_follow_commit_order_not_write_order(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection, database_url: str
) -> None:
    del client  # the app's lifespan runs, and its stamper with it
    late = await asyncpg.connect(plain(database_url))
    try:
        transaction = late.transaction()
        await transaction.start()
        (early,) = await late.fetch("SELECT id FROM jobq.enqueue('mail', 'written-first')")
        (prompt,) = await db.fetch("SELECT id FROM jobq.enqueue('mail', 'committed-first')")
        await stamped(app)  # the uncommitted event waits; the committed one goes ahead
        before = await db.fetch(f"{EVENTS} WHERE position IS NOT NULL ORDER BY position")
        assert [(r["position"], r["job_id"]) for r in before] == [(1, prompt["id"])]
        await transaction.commit()
    finally:
        await late.close()
    after = await events(app, db)
    assert [job_id for _, _, job_id, _, _ in after] == [prompt["id"], early["id"]]


async def test_retention_prunes_a_prefix_and_keeps_the_newest(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    for _ in range(3):
        await enqueue(client, "mail")
    await stamped(app)
    pruner: EventsPruner = app.state.services.events_pruner
    await db.execute("UPDATE jobq.job_events SET at = at - interval '2 hours' WHERE position <= 2")
    assert await pruner.run_once() == 2
    await db.execute("UPDATE jobq.job_events SET at = at - interval '2 hours'")
    assert await pruner.run_once() == 0  # the newest stays: it dates the positions
    assert [r["position"] for r in await db.fetch(f"{EVENTS} ORDER BY position")] == [3]
