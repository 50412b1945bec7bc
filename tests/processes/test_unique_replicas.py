"""Uniqueness on two `jobq serve` processes at once (directly and behind PgBouncer):
concurrent enqueues of one key make one job per period, and `replace` debounces."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import plain
from tests.processes.replicas import Replica, stop_all

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

CONCURRENT = 64
ROUNDS = 3
PERIOD_SECONDS = 1
DEBOUNCED = 100


def _replicas(service_urls: dict[str, str], tmp_path: Path) -> list[Replica]:
    env = {f"JOBQ_{name.upper()}": url for name, url in service_urls.items()}
    url = env.pop("JOBQ_DATABASE_URL")
    return [Replica(url, tmp_path / f"replica-{n}.log", **env) for n in range(2)]


async def _enqueue(http: httpx.AsyncClient, **job: Any) -> dict[str, Any]:
    response = await http.post("/v1/queues/unique/jobs", json={"type": "digest", **job})
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    answer["status"] = response.status_code
    return answer


async def _both(service_urls: dict[str, str], tmp_path: Path, database_url: str) -> None:
    replicas = _replicas(service_urls, tmp_path)
    try:
        clients = [httpx.AsyncClient(base_url=r.url, timeout=30) for r in replicas]
        unique = {"key": "user-42", "period": PERIOD_SECONDS}
        answers: list[dict[str, Any]] = []
        for _ in range(ROUNDS):  # each round its own burst, a period or more apart
            answers += await asyncio.gather(
                *(_enqueue(clients[n % 2], payload=n, unique=unique) for n in range(CONCURRENT))
            )
            await asyncio.sleep(PERIOD_SECONDS * 1.1)

        debounce = {"key": "doc-7", "on_conflict": "replace"}
        last: dict[str, Any] = {}
        for n in range(DEBOUNCED):
            last = await _enqueue(
                clients[n % 2], type="reindex", payload=n, delay_seconds=60, unique=debounce
            )
        for http in clients:
            await http.aclose()
    finally:
        stop_all(replicas)

    by_period: dict[str, set[int]] = defaultdict(set)
    for answer in answers:
        by_period[answer["unique"]["since"]].add(answer["id"])
    assert len(by_period) >= ROUNDS
    assert all(len(ids) == 1 for ids in by_period.values()), by_period
    assert sum(1 for a in answers if a["status"] == 201) == len(by_period)

    conn = await asyncpg.connect(plain(database_url))
    try:
        digests = await conn.fetch(
            "SELECT id, unique_since FROM jobq.jobs WHERE type = 'digest' ORDER BY id"
        )
        reindex = await conn.fetch("SELECT id, payload FROM jobq.jobs WHERE type = 'reindex'")
    finally:
        await conn.close()
    assert len(digests) == len(by_period)
    assert {row["id"] for row in digests} == {min(ids) for ids in by_period.values()}
    assert [(row["id"], row["payload"]) for row in reindex] == [(last["id"], str(DEBOUNCED - 1))]
    assert last["replaced"] and last["payload"] == DEBOUNCED - 1


@pytest.mark.timeout(180)
async def test_one_job_per_period_and_debounce_across_replicas(
    service_urls: dict[str, str], database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """`db` empties the tables first."""
    await _both(service_urls, tmp_path, database_url)
