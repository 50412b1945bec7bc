"""`/metrics`: every family, counters that match a known workload, cached SQL gauges,
readiness and `jobq_database_up` following the database, and one sum across workers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from app.core import metrics
from app.core.config import Settings
from app.main import create_app
from app.maintenance import Reaper
from tests.fixtures.proxy import proxied
from tests.helpers import assert_problem, enqueue, lease
from tests.metrics_support import parse, value

REPO = Path(__file__).resolve().parents[2]
FAMILIES = {
    "jobq_jobs": "gauge",
    "jobq_oldest_queued_age_seconds": "gauge",
    "jobq_queue_paused": "gauge",
    "jobq_jobs_enqueued": "counter",
    "jobq_jobs_leased": "counter",
    "jobq_jobs_completed": "counter",
    "jobq_jobs_failed": "counter",
    "jobq_jobs_retried": "counter",
    "jobq_jobs_lease_expired": "counter",
    "jobq_jobs_dead": "counter",
    "jobq_job_wait_seconds": "histogram",
    "jobq_job_run_seconds": "histogram",
    "jobq_lease_empty_polls": "counter",
    "jobq_reaper_last_run_timestamp_seconds": "gauge",
    "jobq_reaper_jobs_reaped": "counter",
    "jobq_http_request_duration_seconds": "histogram",
    "jobq_db_pool_connections_in_use": "gauge",
    "jobq_jobs_table_dead_tuples": "gauge",
    "jobq_jobs_table_last_autovacuum_timestamp_seconds": "gauge",
    "jobq_oldest_transaction_age_seconds": "gauge",
    "jobq_oldest_xmin_age_transactions": "gauge",
    "jobq_database_up": "gauge",
}


async def scrape(client: httpx.AsyncClient) -> dict[str, Metric]:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


@pytest.fixture
async def fresh_client(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app whose SQL gauges are read again at every scrape."""
    app = app_factory(metrics_refresh_seconds=0)
    yield app, await client_factory(app)


async def test_the_exposition_has_every_family_and_counts_a_known_workload(
    fresh_client: tuple[FastAPI, httpx.AsyncClient], db: asyncpg.Connection
) -> None:
    app, client = fresh_client
    q = f"m-{uuid.uuid4().hex[:8]}"
    before = await scrape(client)
    for n in range(4):
        await enqueue(client, q, idempotency_key=f"k{n}")
    await enqueue(client, q, idempotency_key="k0")  # deduplicated: not counted
    batch = {"jobs": [{"type": "t"}, {"type": "t"}]}
    assert (await client.post(f"/v1/queues/{q}/jobs/batch", json=batch)).status_code == 201
    done, retried, dead, expired = await lease(client, q, max_jobs=4)
    assert (await lease(client, "nothing-due")) == []  # an empty poll
    assert (await client.post(f"/v1/leases/{done['lease_id']}/complete")).status_code == 200
    fail = {"error": {"type": "E"}}
    await client.post(f"/v1/leases/{retried['lease_id']}/fail", json=fail)
    await client.post(f"/v1/leases/{dead['lease_id']}/fail", json={**fail, "retryable": False})
    await db.execute(
        "UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        expired["job"]["id"],
    )
    reaper: Reaper = app.state.services.reaper
    assert (await reaper.run_once()).requeued == 1
    after = await scrape(client)

    assert {name: after[name].type for name in FAMILIES if name in after} == FAMILIES
    counted = {
        name: value(after, f"jobq_jobs_{name}_total", queue=q)
        for name in (
            "enqueued",
            "leased",
            "completed",
            "failed",
            "retried",
            "lease_expired",
            "dead",
        )
    }
    assert counted == {
        "enqueued": 6,
        "leased": 4,
        "completed": 1,
        "failed": 2,
        "retried": 2,
        "lease_expired": 1,
        "dead": 1,
    }
    assert value(after, "jobq_job_wait_seconds_count", queue=q) == 4
    assert value(after, "jobq_job_run_seconds_count", queue=q) == 3
    for name in ("jobq_lease_empty_polls_total", "jobq_reaper_jobs_reaped_total"):
        assert value(after, name) - value(before, name) == 1, name
    assert abs(value(after, "jobq_reaper_last_run_timestamp_seconds") - time.time()) < 60
    # From SQL: 6 created - 4 leased + 2 back in the queue.
    assert value(after, "jobq_jobs", queue=q, state="queued") == 4
    assert value(after, "jobq_jobs", queue=q, state="running") == 0
    assert value(after, "jobq_jobs", queue=q, state="failed") == 1
    assert value(after, "jobq_oldest_queued_age_seconds", queue=q) >= 0
    assert value(after, "jobq_queue_paused", queue=q) == 0
    assert value(after, "jobq_database_up") == 1
    route = {"route": "/v1/queues/{queue}/jobs", "method": "POST"}
    created = value(after, "jobq_http_request_duration_seconds_count", **route, status="201")
    assert created - value(before, "jobq_http_request_duration_seconds_count", **route) >= 4
    assert value(after, "jobq_jobs_table_dead_tuples") >= 0


async def test_one_batch_of_acks_counts_each_outcome_per_queue(
    fresh_client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = fresh_client
    tag = uuid.uuid4().hex[:8]
    first, second = f"ma-{tag}", f"mb-{tag}"
    for queue, jobs in ((first, 3), (second, 2)):
        body = {"jobs": [{"type": "t", "max_attempts": 2}] * jobs}
        assert (await client.post(f"/v1/queues/{queue}/jobs/batch", json=body)).status_code == 201
    a = await lease(client, first, max_jobs=3)
    b = await lease(client, second, max_jobs=2)
    fail = {"outcome": "fail", "error": {"type": "E"}}
    acks = [
        {"lease_id": a[0]["lease_id"], "outcome": "complete"},
        {"lease_id": a[1]["lease_id"], **fail},  # retried: a try is left
        {"lease_id": a[2]["lease_id"], **fail, "retryable": False},  # dead
        {"lease_id": b[0]["lease_id"], "outcome": "complete", "result": {"n": 1}},
        {"lease_id": b[1]["lease_id"], "outcome": "complete"},
    ]
    before = await scrape(client)
    answer = await client.post("/v1/acks", json={"acks": acks})
    assert [r["status"] for r in answer.json()["results"]] == [200] * 5
    after = await scrape(client)

    def moved(name: str, queue: str) -> float:
        return value(after, name, queue=queue) - value(before, name, queue=queue)

    counted = {
        (name, queue): moved(f"jobq_jobs_{name}_total", queue)
        for name in ("completed", "failed", "retried", "dead")
        for queue in (first, second)
    }
    assert counted == {
        ("completed", first): 1,
        ("failed", first): 2,
        ("retried", first): 1,
        ("dead", first): 1,
        ("completed", second): 2,
        ("failed", second): 0,
        ("retried", second): 0,
        ("dead", second): 0,
    }
    assert moved("jobq_job_run_seconds_count", first) == 3
    assert moved("jobq_job_run_seconds_count", second) == 2


async def test_unmatched_paths_share_one_route_label(
    fresh_client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = fresh_client
    label = {"route": "unmatched", "method": "GET", "status": "404"}
    before = value(await scrape(client), "jobq_http_request_duration_seconds_count", **label)
    for n in range(3):
        assert (await client.get(f"/no/such/{n}")).status_code == 404
    after = await scrape(client)
    assert value(after, "jobq_http_request_duration_seconds_count", **label) == before + 3
    assert not any(
        "/no/such" in s.labels.get("route", "") for f in after.values() for s in f.samples
    )


async def test_pool_connections_in_use_are_counted(
    fresh_client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = fresh_client
    # the app's background tasks (flushes, folds) hold a connection now and then: a
    # reading is taken again until none of theirs moved between its three scrapes
    readings = []
    for _ in range(20):
        idle = value(await scrape(client), "jobq_db_pool_connections_in_use")
        async with app.state.services.engine.connect() as conn:
            await conn.get_raw_connection()
            held = value(await scrape(client), "jobq_db_pool_connections_in_use")
        after = value(await scrape(client), "jobq_db_pool_connections_in_use")
        readings.append((idle, held, after))
        if held == idle + 1 and after == idle:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the held connection was never counted alone: {readings}")


async def test_sql_gauges_are_read_at_most_once_per_refresh_interval(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    # An interval no slow machine outlasts between two scrapes; then one that has passed.
    app = app_factory(metrics_refresh_seconds=600)
    client = await client_factory(app)
    q = f"c-{uuid.uuid4().hex[:8]}"
    assert value(await scrape(client), "jobq_jobs", queue=q, state="queued") == 0
    await enqueue(client, q)
    cached = await scrape(client)
    assert value(cached, "jobq_jobs", queue=q, state="queued") == 0  # the snapshot is cached
    assert value(cached, "jobq_jobs_enqueued_total", queue=q) == 1  # counters are live
    app.state.services.queues.stats.refresh_seconds = 0.2
    await asyncio.sleep(0.3)
    assert value(await scrape(client), "jobq_jobs", queue=q, state="queued") == 1


async def test_readiness_and_database_up_follow_the_database(
    database_url: str, client_factory: Callable[[FastAPI], Any], db: asyncpg.Connection
) -> None:
    async with proxied(database_url) as (proxy, url):
        settings = Settings(database_url=url, metrics_refresh_seconds=0)
        app = create_app(settings, database_url=url, run_maintenance=False)
        client = await client_factory(app)
        assert (await client.get("/readyz")).status_code == 200
        assert value(await scrape(client), "jobq_database_up") == 1

        await proxy.stop()  # the database is gone
        assert_problem(await client.get("/readyz"), 503, "database_unavailable")
        down = await scrape(client)  # still answers, from this process's counters
        assert value(down, "jobq_database_up") == 0
        assert "jobq_jobs" not in down and "jobq_http_request_duration_seconds" in down

        await proxy.start()  # and back
        assert (await client.get("/readyz")).status_code == 200
        assert value(await scrape(client), "jobq_database_up") == 1


def test_observing_a_batch_equals_observing_each_value() -> None:
    registry = CollectorRegistry()
    one = Histogram("one", "o", buckets=metrics.JOB_SECONDS_BUCKETS, registry=registry)
    many = Histogram("many", "m", buckets=metrics.JOB_SECONDS_BUCKETS, registry=registry)
    values = [0.0, 0.005, 0.0051, 0.3, 1, 59.9, 3600, 3600.5, 1e9, 0.25, 0.25]
    for v in values:
        one.observe(v)
    metrics.observe_many(many, values)
    samples = parse(generate_latest(registry).decode())
    assert [(s.name[3:], s.labels, s.value) for s in samples["one"].samples] == [
        (s.name[4:], s.labels, s.value) for s in samples["many"].samples
    ]
