"""The service over a database that is down, or slow enough that the reaper stalls: 503s,
never 500s, and readiness that says so."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import asyncpg
import httpx

from app.core.config import Settings
from app.main import create_app
from tests.helpers import assert_problem

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nothing"


async def test_unreachable_database_is_503_not_500() -> None:
    app = create_app(Settings(database_url=UNREACHABLE), run_maintenance=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq.test") as client:
            assert (await client.get("/healthz")).status_code == 200
            response = await client.post("/v1/queues/q/jobs", json={"type": "t"})
            assert_problem(response, 503, "database_unavailable")
            response = await client.post("/v1/leases", json={"queues": ["q"], "worker_id": "w"})
            assert_problem(response, 503, "database_unavailable")


async def test_readiness_follows_the_database(client: httpx.AsyncClient) -> None:
    assert (await client.get("/readyz")).json() == {"status": "ok"}
    app = create_app(Settings(database_url=UNREACHABLE), run_maintenance=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq.test") as down:
            assert_problem(await down.get("/readyz"), 503, "database_unavailable")


RECOVERY_SECONDS = 10  # a busy machine (CI runs two suites at once) may take a while


async def _until_ready(client: httpx.AsyncClient, seconds: float) -> None:
    """Ask `/readyz` until it answers 200; fail with its last answer after `seconds`."""
    deadline = time.monotonic() + seconds
    while (answer := await client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, answer.text
        await asyncio.sleep(0.05)


async def test_readiness_fails_when_the_reaper_stalls(
    make_settings: Callable[..., Settings], database_url: str, db: asyncpg.Connection
) -> None:
    # Retention off: a pruner pass blocked on the table lock would hold the maintenance
    # lock, and the reaper would pass at once as a non-leader (which rightly counts).
    settings = make_settings(
        reaper_interval_seconds=0.05, retain_succeeded_seconds=0, retain_failed_seconds=0
    )
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq.test") as client:
            assert (await client.get("/readyz")).status_code == 200
            async with db.transaction():  # the reaper's statement now waits for this lock
                await db.execute("LOCK TABLE jobq.jobs IN ACCESS EXCLUSIVE MODE")
                await asyncio.sleep(0.5)  # 10 intervals
                assert_problem(await client.get("/readyz"), 503, "reaper_stalled")
            # the pass that waited finishes, and the next ones: ready again
            await _until_ready(client, RECOVERY_SECONDS)
