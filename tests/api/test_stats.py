"""Queue statistics on a known workload: counts, windows and percentiles, exactly."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.queues import repository as queues_sql
from tests.conftest import plain
from tests.helpers import enqueue, lease

TWO_HOURS_AGO = "now() - interval '2 hours'"


async def _workload(client: httpx.AsyncClient, db: asyncpg.Connection) -> dict[str, int]:
    """mail: 6 enqueued (one delayed), 3 leased: one succeeded, one failed for good, one
    running with progress; plus stored jobs outside the windows. reports: 2 queued.
    idle: only a paused row. old: one job that succeeded two hours ago."""
    ids = [(await enqueue(client, "mail"))["id"] for _ in range(5)]
    ids.append((await enqueue(client, "mail", delay_seconds=3600))["id"])
    first, second, third = await lease(client, "mail", max_jobs=3)
    assert [first["job"]["id"], second["job"]["id"], third["job"]["id"]] == ids[:3]
    done = await client.post(f"/v1/leases/{first['lease_id']}/complete", json={"result": 1})
    assert done.status_code == 200
    failed = await client.post(
        f"/v1/leases/{second['lease_id']}/fail",
        json={"error": {"type": "Boom"}, "retryable": False},
    )
    assert failed.json()["state"] == "failed"
    beat = await client.post(
        f"/v1/leases/{third['lease_id']}/heartbeat",
        json={"progress": {"percent": 40, "stage": "render"}},
    )
    assert beat.status_code == 200
    for _ in range(2):
        await enqueue(client, "reports")
    # Controlled times: waits of 1, 2 and 4 s; runs of 10 and 30 s; one job due for 30 min.
    for job_id, wait in zip(ids[:3], (1, 2, 4), strict=True):
        await db.execute(
            "UPDATE jobq.jobs SET created_at = started_at - make_interval(secs => $2)"
            " WHERE id = $1",
            job_id,
            wait,
        )
    for job_id, ran in zip(ids[:2], (10, 30), strict=True):
        await db.execute(
            "UPDATE jobq.jobs SET attempted_at = finished_at - make_interval(secs => $2)"
            " WHERE id = $1",
            job_id,
            ran,
        )
    await db.execute(
        "UPDATE jobq.jobs SET created_at = now() - interval '30 minutes',"
        " run_at = now() - interval '30 minutes' WHERE id = $1",
        ids[3],
    )
    # Stored jobs outside every window: a failed one (counted), a succeeded one (not).
    for queue, state in (("mail", "failed"), ("mail", "cancelled"), ("old", "succeeded")):
        await db.execute(
            f"""
            INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                                   attempt, created_at, started_at, attempted_at, finished_at)
            VALUES ($1, 't', '{{}}', $2, 1, 60, 1, {TWO_HOURS_AGO}, {TWO_HOURS_AGO},
                    {TWO_HOURS_AGO}, {TWO_HOURS_AGO})
            """,
            queue,
            state,
        )
    await db.execute(
        "INSERT INTO jobq.queues (name, paused, paused_at) VALUES ('idle', true, now())"
    )
    return {"running": third["job"]["id"]}


@pytest.fixture
async def clean_queues(db: asyncpg.Connection) -> asyncpg.Connection:
    await db.execute("TRUNCATE jobq.queues")
    return db


BUCKET_RATIO = 2**0.25  # a percentile's bound: docs/operations/monitoring.md


def _near(got: dict[str, float], exact: dict[str, float]) -> bool:
    """Each percentile within the buckets' bound of the exact one."""
    return got.keys() == exact.keys() and all(
        exact[p] / BUCKET_RATIO <= got[p] <= exact[p] * BUCKET_RATIO for p in exact
    )


def _by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["queue"]: q for q in body["queues"]}


async def test_stats_match_a_known_workload(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    known = await _workload(client, clean_queues)
    response = await client.get("/v1/queues")
    assert response.status_code == 200, response.text
    queues = _by_name(response.json())
    assert list(queues) == ["idle", "mail", "reports"]  # "old" only has an old success

    mail = queues["mail"]
    assert mail["counts"] == {
        "queued": 3, "due": 2, "running": 1, "waiting": 0, "failed": 2, "cancelled": 1
    }  # fmt: skip
    assert mail["paused"] is False and mail["paused_at"] is None
    assert 1795 < mail["oldest_due_age_seconds"] < 1830
    assert mail["last_minute"] == {"enqueued": 5, "succeeded": 1, "failed": 1}
    hour = mail["last_hour"]
    assert (hour["enqueued"], hour["succeeded"], hour["failed"]) == (6, 1, 1)
    # From duration buckets: within 2^(1/4) of the nearest rank (waits 1, 2, 4 s).
    assert _near(hour["wait_seconds"], {"p50": 2.0, "p95": 4.0})
    assert _near(hour["run_seconds"], {"p50": 10.0, "p95": 30.0})  # runs 10, 30 s
    (running,) = mail["running_jobs"]
    assert running["id"] == known["running"]
    assert (running["worker_id"], running["attempt"], running["max_attempts"]) == ("w1", 1, 5)
    assert running["progress"]["percent"] == 40 and running["progress"]["stage"] == "render"

    reports = queues["reports"]
    assert reports["counts"] == {
        "queued": 2, "due": 2, "running": 0, "waiting": 0, "failed": 0, "cancelled": 0
    }  # fmt: skip
    assert reports["last_hour"]["wait_seconds"] == {"p50": None, "p95": None}
    assert reports["running_jobs"] == []

    idle = queues["idle"]
    assert idle["paused"] is True and idle["paused_at"] is not None
    states = ("queued", "due", "running", "waiting", "failed", "cancelled")
    assert idle["counts"] == dict.fromkeys(states, 0)
    assert idle["oldest_due_age_seconds"] is None

    one = await client.get("/v1/queues/mail")
    assert one.status_code == 200
    fresh = one.json()
    assert abs(fresh.pop("oldest_due_age_seconds") - mail.pop("oldest_due_age_seconds")) < 5
    detail = ("known", "unserved_types", "fair_keys", "push")
    assert [fresh.pop(name) for name in detail] == [True, [], [], None]
    assert fresh == mail


async def test_a_queue_nothing_names_has_zero_figures(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    body = (await client.get("/v1/queues/nothing-here")).json()
    assert body["queue"] == "nothing-here" and body["paused"] is False
    assert set(body["counts"].values()) == {0}
    assert body["last_minute"] == {"enqueued": 0, "succeeded": 0, "failed": 0}
    assert body["running_jobs"] == []
    assert (await client.get("/v1/queues")).json()["queues"] == []
    assert (await client.get("/v1/queues/not%20a%20name")).status_code == 422


async def test_running_jobs_are_bounded_per_queue(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    for _ in range(25):
        await enqueue(client, "busy")
    await lease(client, "busy", max_jobs=25)
    body = (await client.get("/v1/queues/busy")).json()
    assert body["counts"]["running"] == 25
    shown = [job["id"] for job in body["running_jobs"]]
    assert len(shown) == 20 and shown == sorted(shown)


async def test_database_health_sees_vacuum_and_an_open_transaction(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    clean_queues: asyncpg.Connection,
    database_url: str,
) -> None:
    db = clean_queues
    # the event stamper and the subscriptions' dispatcher idle: their transactions,
    # several a second, would show as the oldest open one
    idle = app_factory(event_stamp_interval_seconds=10, subscription_interval_seconds=60)
    client: httpx.AsyncClient = await client_factory(idle)
    for _ in range(3):
        await enqueue(client, "q")
    await db.execute("DELETE FROM jobq.jobs")
    await db.execute("VACUUM jobq.jobs")
    health: dict[str, Any] = {}
    for _ in range(50):  # statistics reach the shared view when the backend next idles
        await db.execute("SELECT pg_stat_force_next_flush()")
        health = (await client.get("/v1/queues")).json()["database"]
        if health["jobs_last_vacuum"] is not None:
            break
        await asyncio.sleep(0.1)
    assert health["jobs_last_vacuum"] is not None
    assert isinstance(health["jobs_dead_tuples"], int) and health["jobs_dead_tuples"] >= 0
    assert health["oldest_transaction_age_seconds"] is None

    holder = await asyncpg.connect(plain(database_url))
    try:
        async with holder.transaction(isolation="repeatable_read"):
            await holder.fetchval("SELECT count(*) FROM jobq.jobs")  # takes the snapshot
            await asyncio.sleep(0.3)
            health = (await client.get("/v1/queues")).json()["database"]
            assert health["oldest_transaction_age_seconds"] >= 0.3
            assert isinstance(health["oldest_xmin_age"], int)
    finally:
        await holder.close()
    health = (await client.get("/v1/queues")).json()["database"]
    assert health["oldest_transaction_age_seconds"] is None


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "Scan" in plan["Node Type"]:
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child)


@pytest.mark.parametrize("statement", ["QUEUE_STATS", "QUEUE_OVERVIEW"])
async def test_statistics_read_indexes_not_the_finished_history(
    db: asyncpg.Connection, statement: str
) -> None:
    # A day of succeeded jobs, a few live and failed ones: the figures must come from the
    # partial indexes and the finished-time index, never from reading every stored job.
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               created_at, finished_at)
        SELECT 'q' || (g % 3), 't', '{}',
               CASE WHEN g % 500 = 0 THEN 'failed' ELSE 'succeeded' END::jobq.job_state,
               5, 60, now() - interval '1 day', now() - g * interval '1 second'
          FROM generate_series(1, 30000) g
        """
    )
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q1', 't', '{}', 5, 60 FROM generate_series(1, 20)"
    )
    await db.execute("ANALYZE jobq.jobs")
    # jobq.queue_overview reads the jobs; it runs with its own settings (no JIT), so it is
    # planned apart from the statement that calls it: both plans are checked.
    body = await db.fetchval(
        "SELECT prosrc FROM pg_proc WHERE oid = 'jobq.queue_overview(text)'::regprocedure"
    )
    overview = re.sub(r"\bone\b", "CAST($1 AS text)", body)
    scans: list[dict[str, Any]] = []
    for sql in (getattr(queues_sql, statement).sql, overview):
        await db.execute(f"PREPARE stats AS {sql}")
        try:
            for mode in ("force_custom_plan", "force_generic_plan"):
                await db.execute(f"SET plan_cache_mode = {mode}")
                for queue in ("NULL", "'q1'"):
                    explained = await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE stats({queue})")
                    plan = json.loads(explained)[0]["Plan"]
                    found = [s for s in _scans(plan) if s.get("Relation Name") == "jobs"]
                    assert all(s["Node Type"] != "Seq Scan" for s in found), (mode, plan)
                    scans += found
        finally:
            await db.execute("DEALLOCATE stats")
            await db.execute("RESET plan_cache_mode")
    assert scans  # the jobs are read, along their indexes


# ---- queues nobody uses, types nobody serves -------------------------------------------


async def test_a_queue_nothing_ever_used_is_not_known(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    assert (await client.get("/v1/queues/emals")).json()["known"] is False
    await enqueue(client, "emails")
    assert (await client.get("/v1/queues/emails")).json()["known"] is True
    await client.post("/v1/queues/idle/pause")
    assert (await client.get("/v1/queues/idle")).json()["known"] is True  # it has settings


async def test_a_queue_once_leased_from_stays_known_when_its_jobs_are_gone(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    job = await enqueue(client, "gone")
    (leased,) = await lease(client, "gone")
    await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={"result": 1})
    assert (await client.delete(f"/v1/jobs/{job['id']}")).status_code == 204
    body = (await client.get("/v1/queues/gone")).json()
    assert set(body["counts"].values()) == {0}
    assert body["known"] is True


async def test_types_whose_due_jobs_nobody_leases_are_named(
    client: httpx.AsyncClient, clean_queues: asyncpg.Connection
) -> None:
    for job_type in ("send", "send", "bounce", "digest"):
        await enqueue(client, "mail", type=job_type)
    await enqueue(client, "mail", type="later", delay_seconds=3600)
    await clean_queues.execute(  # due for ten minutes, and "later" due in 50 minutes
        "UPDATE jobq.jobs SET run_at = run_at - interval '10 minutes'"
    )
    assert (await client.get("/v1/queues/mail")).json()["unserved_types"] == [
        {"type": t, "oldest_due_age_seconds": pytest.approx(600, abs=30), "last_leased_at": None}
        for t in ("bounce", "digest", "send")
    ]
    # A worker serves "send" and, ten minutes ago, "digest".
    await lease(client, "mail", types=["send"])
    await lease(client, "mail", types=["digest"])
    await clean_queues.execute(
        "UPDATE jobq.queue_types SET last_leased_at = now() - interval '10 minutes'"
        " WHERE type = 'digest'"
    )
    await enqueue(client, "mail", type="digest")
    await clean_queues.execute(
        "UPDATE jobq.jobs SET run_at = now() - interval '10 minutes' WHERE state = 'queued'"
        " AND type <> 'later'"
    )
    unserved = (await client.get("/v1/queues/mail")).json()["unserved_types"]
    assert [(u["type"], u["last_leased_at"] is None) for u in unserved] == [
        ("bounce", True),
        ("digest", False),
    ]


async def test_unserved_types_read_the_claim_index_not_the_history(
    db: asyncpg.Connection,
) -> None:
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,"
        "                       finished_at)"
        " SELECT 'q', 't' || (g % 7), '{}', 'succeeded', 5, 60, now()"
        "   FROM generate_series(1, 30000) g"
    )
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 5, 60 FROM generate_series(1, 20)"
    )
    await db.execute("ANALYZE jobq.jobs")
    await db.execute(f"PREPARE probe AS {queues_sql.UNSERVED_TYPES.sql}")
    try:
        explained = await db.fetchval("EXPLAIN (FORMAT JSON) EXECUTE probe('q', 1000, 300)")
    finally:
        await db.execute("DEALLOCATE probe")
    plan = json.loads(explained)[0]["Plan"]
    (jobs,) = [s for s in _scans(plan) if s.get("Relation Name") == "jobs"]
    assert jobs["Node Type"] == "Index Scan" and jobs["Index Name"] == "jobs_claim_idx", plan
