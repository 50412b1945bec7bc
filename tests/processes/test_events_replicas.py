"""An event stream across replicas: a client follows `GET /v1/events` on one `jobq serve`,
that replica is SIGKILLed while jobs are enqueued through both, and the client resumes
on the other with `Last-Event-ID`: it sees every event, each once, in position order.
Every job the queue holds: an enqueue the killed replica committed but could not answer
has its event too."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.processes.replicas import Replica, stop_all
from tests.sse import Frame, frames

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

# the session's database is shared: a queue of each run's own
QUEUE = f"events-replicas-{uuid.uuid4().hex[:8]}"
JOBS = 300


async def _produce(urls: list[str], stop_after: int) -> list[int]:
    """Enqueue `stop_after` jobs one at a time, alternating replicas, skipping a dead one."""
    made: list[int] = []
    async with httpx.AsyncClient(timeout=10) as http:
        while len(made) < stop_after:
            for url in urls:
                try:
                    response = await http.post(f"{url}/v1/queues/{QUEUE}/jobs", json={"type": "t"})
                except httpx.TransportError:
                    continue
                assert response.status_code == 201, response.text
                made.append(response.json()["id"])
            await asyncio.sleep(0.002)
    return made


async def _follow(url: str, last_id: str | None, into: list[Frame], enough: int) -> str | None:
    """Follow one replica's stream into `into` until `enough` events or the connection
    drops; the last event id seen (as a browser keeps it)."""
    headers = {"Last-Event-ID": last_id} if last_id is not None else {}
    try:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(30)) as http,
            http.stream(
                "GET", f"{url}/v1/events", params={"queue": QUEUE}, headers=headers
            ) as response,
        ):
            assert response.status_code == 200, await response.aread()
            async for frame in frames(response):
                if frame.id is not None:
                    last_id = frame.id
                if frame.data is not None:
                    into.append(frame)
                    if len(into) >= enough:
                        break
    except (httpx.TransportError, httpx.RemoteProtocolError):
        pass
    return last_id


async def test_a_stream_resumed_on_another_replica_misses_nothing(
    tmp_path: Path, service_urls: dict[str, str], db: asyncpg.Connection
) -> None:
    env = (
        {"JOBQ_DATABASE_DIRECT_URL": service_urls["database_direct_url"]}
        if ("database_direct_url" in service_urls)
        else {}
    )
    replicas = [
        Replica(service_urls["database_url"], tmp_path / f"replica{n}.log", **env) for n in range(2)
    ]
    try:
        doomed, survivor = replicas
        seen: list[Frame] = []
        follow = asyncio.create_task(_follow(doomed.url, None, seen, JOBS))
        await asyncio.sleep(0.5)  # the stream is open
        produce = asyncio.create_task(_produce([doomed.url, survivor.url], JOBS))
        while len(seen) < JOBS // 3:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(doomed.kill)
        last_id = await asyncio.wait_for(follow, 30)
        assert len(seen) < JOBS
        made = await asyncio.wait_for(produce, 60)
        queued = [
            r["id"] for r in await db.fetch("SELECT id FROM jobq.jobs WHERE queue = $1", QUEUE)
        ]
        assert set(made) <= set(queued)
        await asyncio.wait_for(_follow(survivor.url, last_id, seen, len(queued)), 60)
    finally:
        stop_all([r for r in replicas if r.process.poll() is None])
    ids = [int(frame.id or 0) for frame in seen]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), "in order, each once"
    assert sorted(frame.data["job_id"] for frame in seen) == sorted(queued)
