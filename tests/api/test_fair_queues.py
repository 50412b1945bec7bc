"""Fair queues over HTTP, on real connections and two replicas: leases take turns across
fairness keys (a flood from one tenant does not hold back the others), weights give
proportional shares, `rate_limit_per_key` holds in every window, aging lifts a starved
job within its bound, and a fifo queue ignores the keys."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import assert_problem, enqueue, enqueue_batches, lease, put_settings

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

Factories = tuple[Callable[..., FastAPI], Callable[[FastAPI], Any]]


async def _lease_until(
    replicas: list[httpx.AsyncClient], queue: str, total: int, leasers: int = 8, max_jobs: int = 5
) -> None:
    """`leasers` workers spread over the replicas lease (and keep) jobs until `total` are."""
    leased = 0

    async def leaser(client: httpx.AsyncClient) -> None:
        nonlocal leased
        while leased < total:
            got = await lease(client, queue, max_jobs=max_jobs)
            leased += len(got)
            if not got:
                return

    await asyncio.gather(*(leaser(replicas[i % len(replicas)]) for i in range(leasers)))


async def _leased_keys(db: asyncpg.Connection, queue: str) -> list[str]:
    """The fairness keys of the queue's leased jobs, in the order they were leased."""
    rows = await db.fetch(
        "SELECT fairness_key FROM jobq.jobs WHERE queue = $1 AND attempt > 0"
        " ORDER BY attempted_at, id",
        queue,
    )
    return [r["fairness_key"] for r in rows]


async def _replicas(factories: Factories) -> list[httpx.AsyncClient]:
    app_factory, client_factory = factories
    return [await client_factory(app_factory()) for _ in range(2)]


@pytest.fixture
def factories(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> Factories:
    return app_factory, client_factory


async def test_a_flood_from_one_key_does_not_hold_back_the_others(
    factories: Factories, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await put_settings(client, "tenants", ordering="fair")
    await enqueue_batches(client, "tenants", [{"type": "t", "fairness_key": "A"}] * 10_000)
    for key in ("B", "C"):
        await enqueue_batches(client, "tenants", [{"type": "t", "fairness_key": key}] * 100)
    await _lease_until(await _replicas(factories), "tenants", 300)
    first = Counter((await _leased_keys(db, "tenants"))[:300])
    assert first["B"] == first["C"] == 100, first


async def test_weights_give_each_key_its_share_while_both_have_jobs(
    factories: Factories, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await put_settings(client, "weighted", ordering="fair", fair_weights={"gold": 3})
    jobs = [{"type": "t", "fairness_key": key} for key in ("gold", "free")]
    await enqueue_batches(client, "weighted", jobs * 1500)
    await _lease_until(await _replicas(factories), "weighted", 1200, leasers=12, max_jobs=7)
    keys = (await _leased_keys(db, "weighted"))[:1200]
    for start in range(0, 1200, 200):  # every stretch, not only the whole
        share = Counter(keys[start : start + 200])
        assert 2.7 <= share["gold"] / share["free"] <= 3.3, (start, share)


async def test_the_rate_limit_per_key_holds_in_every_window_across_replicas(
    factories: Factories, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await put_settings(
        client, "per-key", ordering="fair", rate_limit_per_key={"jobs": 4, "per_seconds": 0.5}
    )
    await enqueue_batches(
        client, "per-key", [{"type": "t", "fairness_key": f"k{i % 3}"} for i in range(90)]
    )
    replicas = await _replicas(factories)
    first = await replicas[0].post(
        "/v1/leases", json={"queues": ["per-key"], "max_jobs": 20, "worker_id": "w"}
    )
    assert len(first.json()["leases"]) == 12  # 4 of each key
    assert first.headers["Jobq-Throttled"] == "rate_limit_per_key"

    async def leaser(c: httpx.AsyncClient) -> None:
        until = time.monotonic() + 1.6
        while time.monotonic() < until:
            await lease(c, "per-key", max_jobs=3, wait_seconds=0.2)

    await asyncio.gather(*(leaser(replicas[i % 2]) for i in range(8)))
    rows = await db.fetch(
        "SELECT fairness_key, attempted_at FROM jobq.jobs WHERE queue = 'per-key' AND attempt > 0"
    )
    assert len(rows) >= 36  # the limit was reached, window after window
    for key in ("k0", "k1", "k2"):
        times = sorted(r["attempted_at"] for r in rows if r["fairness_key"] == key)
        for i, start in enumerate(times):
            in_window = [t for t in times[i:] if t - start < timedelta(seconds=0.5)]
            assert len(in_window) <= 4, (key, start, len(in_window))


async def test_aging_lifts_a_starved_job_within_its_bound(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    """Priority 0 against a steady stream of priority 10: +1 per 0.1 s waited, so the old
    job ties the stream's fresh jobs after 1 s and goes first (it has waited longer)."""
    await put_settings(client, "aged", ordering="fair", aging={"per_seconds": 0.1, "max_boost": 20})
    old = await enqueue(client, "aged", priority=0)
    started = time.monotonic()
    while True:
        await enqueue(client, "aged", priority=10)
        (got,) = await lease(client, "aged")
        if got["job"]["id"] == old["id"]:
            break
        assert time.monotonic() - started < 2.0, "starved past its bound"
        await asyncio.sleep(0.01)
    assert time.monotonic() - started >= 0.9  # the stream went first until then


async def test_a_fifo_queue_ignores_fairness_keys(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue_batches(client, "plain", [{"type": "t", "fairness_key": "A"}] * 50)
    await enqueue_batches(client, "plain", [{"type": "t", "fairness_key": "B"}] * 5)
    leased = await lease(client, "plain", max_jobs=20)
    assert [x["job"]["fairness_key"] for x in leased] == ["A"] * 20  # oldest first
    assert await db.fetchval("SELECT count(*) FROM jobq.fair_keys") == 0


async def test_a_queue_made_fair_takes_turns_over_the_jobs_it_holds(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await enqueue_batches(client, "switch", [{"type": "t", "fairness_key": "A"}] * 30)
    await enqueue_batches(client, "switch", [{"type": "t"}] * 3)  # keyless: one key between them
    await enqueue_batches(client, "switch", [{"type": "t", "fairness_key": "B"}] * 3)
    await put_settings(client, "switch", ordering="fair")
    leased = await lease(client, "switch", max_jobs=6)
    assert Counter(x["job"]["fairness_key"] for x in leased) == {"A": 2, None: 2, "B": 2}
    await put_settings(client, "switch", ordering=None)  # back to fifo: the rows go
    assert (await put_settings(client, "switch", max_backlog=100))["ordering"] == "fifo"
    assert await db.fetchval("SELECT count(*) FROM jobq.fair_keys") == 0
    assert len(await lease(client, "switch", max_jobs=30)) == 30


async def test_fair_settings_that_do_not_go_together_are_refused(
    client: httpx.AsyncClient,
) -> None:
    aging = {"aging": {"per_seconds": 5, "max_boost": 3}}
    response = await client.put("/v1/queues/s/settings", json=aging)
    assert_problem(response, 422, "validation_error")
    assert response.json()["errors"][0]["loc"] == ["body", "ordering"]
    await put_settings(client, "s", max_running_per_key=1)
    response = await client.put("/v1/queues/s/settings", json={"ordering": "fair"})
    assert_problem(response, 422, "validation_error")
    fair = await put_settings(client, "s", max_running_per_key=None, ordering="fair", **aging)
    assert fair["aging"] == {"per_seconds": 5, "max_boost": 3}
    response = await client.put("/v1/queues/s/settings", json={"fair_weights": {"k": 0}})
    assert_problem(response, 422, "validation_error")


async def test_the_busiest_keys_show_in_the_queue_and_not_in_metrics(
    client: httpx.AsyncClient,
) -> None:
    await put_settings(client, "shown", ordering="fair")
    jobs = [{"type": "t", "fairness_key": f"k{i:02}"} for i in range(25) for _ in range(i + 1)]
    await enqueue_batches(client, "shown", jobs)
    await enqueue_batches(client, "shown", [{"type": "t", "delay_seconds": 60}] * 30)
    await lease(client, "shown", max_jobs=26)  # one of each key: k00 has none left
    detail = (await client.get("/v1/queues/shown")).json()
    keys = detail["fair_keys"]
    assert len(keys) == 20
    assert keys[:2] == [
        {"fairness_key": "", "queued": 30, "due": 0, "running": 0},  # keyless, delayed
        {"fairness_key": "k24", "queued": 24, "due": 24, "running": 1},
    ]
    assert [k["queued"] for k in keys] == sorted((k["queued"] for k in keys), reverse=True)
    await enqueue(client, "fifo", fairness_key="x")
    assert (await client.get("/v1/queues/fifo")).json()["fair_keys"] == []
    metrics = (await client.get("/metrics")).text
    assert "k24" not in metrics and "fairness" not in metrics
