"""Push delivery statistics in PostgreSQL (`jobq.push_minutes`, migration 0037): two
replicas' tallies added to the same minutes, read back as sums by class with latency
percentiles, and pruned with the statistics' retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from app.db.database import Database
from app.db.engine import create_engine
from app.delivery import Attempt
from app.maintenance.repository import MaintenanceRepository
from app.push import PushRepository
from app.push.params import SetPushTargetParams
from app.push.service.tally import Tally, duration_bucket


@pytest.fixture
async def databases(database_url: str, db: asyncpg.Connection) -> AsyncIterator[list[Database]]:
    """Two pools, as two replicas have."""
    engines = [create_engine(database_url, 2) for _ in range(2)]
    yield [Database(engine) for engine in engines]
    for engine in engines:
        await engine.dispose()


def _answer(status: int, seconds: float) -> Attempt:
    return Attempt(status, b"", {}, seconds)


async def _target(repo: PushRepository, queue: str) -> None:
    await repo.set(SetPushTargetParams(queue, "http://127.0.0.1:9/x", "{}", 5.0, ["s"]))


async def test_duration_bucket_is_the_sql_function(db: asyncpg.Connection) -> None:
    durations = [0.0, 0.0005, 0.001, 0.0014, 0.00142, 0.002, 0.0101, 0.25, 1.0, 7.3, 1e9]
    in_sql = await db.fetch(
        "SELECT jobq.duration_bucket(s) FROM unnest(CAST($1 AS float8[])) AS s", durations
    )
    assert [duration_bucket(s) for s in durations] == [r[0] for r in in_sql]


async def test_two_replicas_tallies_add_up_in_the_same_minutes(
    databases: list[Database], db: asyncpg.Connection
) -> None:
    repos = [PushRepository(d) for d in databases]
    await _target(repos[0], "hooks")
    await _target(repos[0], "quiet")
    tallies = [Tally(), Tally()]
    answers = [(200, 0.01)] * 6 + [(202, 0.01), (429, 0.02), (404, 0.02), (500, 0.5)]
    for tally in tallies:
        for status, seconds in answers:
            tally.count("hooks", _answer(status, seconds))
        tally.count("hooks", Attempt(None, b"", {}, 0.5, failure="timeout"))
    # each replica writes its own twice over (the second write adds to the same rows)
    for _ in range(2):
        params = [t.take() for t in tallies]
        await asyncio.gather(*(r.add_minutes(p) for r, p in zip(repos, params, strict=True) if p))
        for tally in tallies:
            for status, seconds in answers[:2]:
                tally.count("hooks", _answer(status, seconds))
    assert len(tallies[0]) == 1  # the last counts are not written yet
    assert await db.fetchval("SELECT count(*) FROM jobq.push_minutes") == 1

    stats = {row.queue: row for row in await repos[1].stats(None)}
    hooks = stats["hooks"]
    # 2 replicas x (11 + 2 more on the second write)
    assert hooks.deliveries_1h == hooks.deliveries_1m == 2 * (11 + 2)
    assert hooks.classes_1h == {
        "2xx": 2 * 8,
        "202": 2,
        "retry_later": 2,
        "4xx": 2,
        "5xx": 2,
        "timeout": 2,
    }
    assert hooks.latency_1h is not None
    p50, p95 = hooks.latency_1h
    # within a bucket's 19 % of the true values: 10 ms, and 500 ms (the 5xx and the
    # timeout are the slowest 4 of 26)
    assert 0.01 / 1.19 <= p50 <= 0.01 * 1.19 and 0.5 / 1.19 <= p95 <= 0.5 * 1.19
    assert stats["quiet"].deliveries_1h == 0 and stats["quiet"].latency_1h is None
    assert [r.queue for r in await repos[0].stats("quiet")] == ["quiet"]


async def test_minutes_past_retention_are_pruned(
    databases: list[Database], db: asyncpg.Connection
) -> None:
    await db.execute(
        "INSERT INTO jobq.push_minutes (queue, minute, deliveries) "
        "VALUES ('hooks', date_trunc('minute', now()) - interval '2 days', 3), "
        "       ('hooks', date_trunc('minute', now()), 4)"
    )
    pruned = await MaintenanceRepository(databases[0]).prune_push_minutes(100, 86_400.0)
    assert pruned == 1
    assert await db.fetchval("SELECT sum(deliveries) FROM jobq.push_minutes") == 4
