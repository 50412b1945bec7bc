"""The audit log over HTTP: what an entry holds, refused attempts, `GET /v1/audit`'s
filters and pages, retention, and an action whose row cannot be written.
(Every admin route's recording is tests/api/test_audit_routes.py.)"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.audit import AuditPruner
from app.keys import mint
from app.maintenance import MAINTENANCE_LOCK_KEY
from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key, enqueue, lease_one, revoke_key
from tests.metrics_support import parse, value

pytestmark = [pytest.mark.pgbouncer, pytest.mark.usefixtures("no_keys")]

Factory = Callable[..., Awaitable[Service]]


async def _audit(client: httpx.AsyncClient, token: str | None, **params: Any) -> dict[str, Any]:
    response = await client.get("/v1/audit", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def _keyed(service_factory: Factory, database_url: str) -> tuple[Service, str, str]:
    """A service requiring keys, with an `ops` admin key and a `reader` read key."""
    admin = await create_key(database_url, "ops", ["admin"])
    reader = await create_key(database_url, "reader", ["read"])
    return await service_factory(), admin, reader


async def test_an_entry_says_who_did_what_when_how_it_ended_and_its_request_id(
    service_factory: Factory, database_url: str
) -> None:
    service, admin, _ = await _keyed(service_factory, database_url)
    started = datetime.now(UTC)
    response = await service.remote.put(
        "/v1/queues/emails/settings",
        json={"max_running": 3, "ordering": "fifo", "rate_limit": {"jobs": 5, "per_seconds": 1}},
        headers={**bearer(admin), "X-Request-ID": "change-42"},
    )
    assert response.status_code == 200, response.text
    (entry,) = (await _audit(service.remote, admin))["entries"]
    assert entry | {"id": 0, "at": None} == {
        "id": 0,
        "at": None,
        "key": "ops",
        "action": "setQueueSettings",
        "method": "PUT",
        "path": "/v1/queues/emails/settings",
        "queue": "emails",
        "job_id": None,
        "target": None,
        "detail": {
            "max_running": 3,
            "ordering": "fifo",
            "rate_limit": {"jobs": 5, "per_seconds": 1},
        },
        "status": 200,
        "request_id": "change-42",
    }
    at = datetime.fromisoformat(entry["at"])
    assert started - timedelta(seconds=5) < at < datetime.now(UTC) + timedelta(seconds=5)


async def test_targets_come_from_the_path_and_the_body(
    service_factory: Factory, database_url: str
) -> None:
    service, admin, _ = await _keyed(service_factory, database_url)
    made = await service.remote.post(
        "/v1/queues/mail/jobs", json={"type": "t"}, headers=bearer(admin)
    )
    job_id = made.json()["id"]
    calls = [
        ("POST", f"/v1/jobs/{job_id}/cancel", None),
        ("POST", "/v1/keys", {"name": "ingest", "scopes": ["enqueue"], "queues": ["mail"]}),
        ("PUT", "/v1/schedules/nightly", {"queue": "mail", "type": "t", "cron": "@daily"}),
        ("DELETE", "/v1/keys/nobody", None),
    ]
    for method, path, body in calls:
        await service.remote.request(method, path, json=body, headers=bearer(admin))
    entries = (await _audit(service.remote, admin))["entries"]
    shown = [(e["action"], e["queue"], e["job_id"], e["target"], e["status"]) for e in entries]
    assert shown == [
        ("revokeKey", None, None, "nobody", 404),
        ("setSchedule", "mail", None, "nightly", 201),
        ("createKey", None, None, "ingest", 201),
        ("cancelJob", None, job_id, None, 200),
    ]
    assert entries[2]["detail"] == {"name": "ingest", "scopes": ["enqueue"], "queues": ["mail"]}


async def test_payloads_urls_and_secrets_are_never_recorded(
    service_factory: Factory, database_url: str, db: asyncpg.Connection
) -> None:
    service, admin, _ = await _keyed(service_factory, database_url)
    secret = "whsec_" + "U0VDUkVU" * 4
    calls = [
        (
            "/v1/schedules/s",
            {
                "queue": "q",
                "type": "t",
                "cron": "@daily",
                "payload": {"card": "4111"},
                "metadata": {"who": "alice"},
            },
        ),
        (
            "/v1/subscriptions/hook",
            {"url": "https://hooks.example.com/x?sig=pw@", "secrets": [secret]},
        ),
        (
            "/v1/queues/pushed/settings",
            {
                "push": {
                    "url": "https://hooks.example.com/p?token=abc",
                    "secrets": [secret],
                    "headers": {"Authorization": "Bearer hush"},
                }
            },
        ),
    ]
    for path, body in calls:
        response = await service.remote.put(path, json=body, headers=bearer(admin))
        assert response.status_code < 300, response.text
    # refused, and recorded all the same
    refused = {"url": "https://user:pw@hooks.example.com/x"}
    response = await service.remote.put("/v1/subscriptions/x", json=refused, headers=bearer(admin))
    assert response.status_code == 422, response.text
    text = str(await db.fetch("SELECT detail::text FROM jobq.audit_log"))
    for never in ("4111", "alice", "pw@", secret, "token=abc", "hush", admin):
        assert never not in text
    entries = (await _audit(service.remote, admin))["entries"][1:]
    assert entries[0]["detail"]["push"] == {
        "url": "[not recorded]",
        "secrets": "[not recorded]",
        "headers": "[not recorded]",
    }
    assert entries[2]["detail"]["payload"] == "[not recorded]"


async def test_refused_attempts_are_recorded_with_the_key_they_named(
    service_factory: Factory, database_url: str
) -> None:
    service, admin, reader = await _keyed(service_factory, database_url)
    unknown = mint()[0]
    assert (
        await service.remote.post("/v1/queues/q/pause", headers=bearer(reader))
    ).status_code == 403
    assert (
        await service.remote.post("/v1/queues/q/pause", headers=bearer(unknown))
    ).status_code == 401
    assert (await service.remote.post("/v1/queues/q/resume")).status_code == 401
    # a body without a valid key is refused by the key gate, before any route is matched
    refused = await service.remote.post(
        "/v1/queues/q/purge", json={"confirm": "q"}, headers=bearer(unknown)
    )
    assert refused.status_code == 401
    # a revoked key, and a known key's id with a wrong secret, are named (in the log only)
    gone = await create_key(database_url, "gone", ["admin"])
    await revoke_key(database_url, "gone")
    forged = admin[: len("jobq_") + 17] + "A" * 43  # its lookup id, another secret
    for token in (gone, forged):
        answer = await service.remote.post("/v1/queues/q/pause", headers=bearer(token))
        assert answer.status_code == 401 and "gone" not in answer.text and "ops" not in answer.text
    with_body = await service.remote.post(
        "/v1/queues/q/failed/retry", json={}, headers=bearer(gone)
    )  # the key gate's refusal
    assert with_body.status_code == 401
    # refused reads are not recorded
    assert (await service.remote.get("/v1/queues/q", headers=bearer(unknown))).status_code == 401
    entries = (await _audit(service.remote, admin))["entries"]
    shown = [(e["key"], e["action"], e["status"], e["queue"], e["detail"]) for e in entries]
    assert shown == [
        ("gone", "redriveFailedJobs", 401, "q", {}),
        ("ops", "pauseQueue", 401, "q", {}),
        ("gone", "pauseQueue", 401, "q", {}),
        (None, "purgeQueue", 401, "q", {}),
        (None, "resumeQueue", 401, "q", {}),
        (None, "pauseQueue", 401, "q", {}),
        ("reader", "pauseQueue", 403, "q", {}),
    ]


async def test_an_open_service_records_no_key(service_factory: Factory) -> None:
    service = await service_factory()
    assert (await service.local.post("/v1/queues/q/pause")).status_code == 200
    (entry,) = (await _audit(service.local, None))["entries"]
    assert (entry["key"], entry["action"], entry["status"]) == (None, "pauseQueue", 200)


async def test_the_data_plane_and_reads_write_nothing(
    service_factory: Factory, db: asyncpg.Connection
) -> None:
    service = await service_factory()
    client = service.local
    await enqueue(client, "q")
    held = await lease_one(client, "q")
    done = await client.post(f"/v1/leases/{held['lease_id']}/complete", json={})
    assert done.status_code == 200
    for path in ("/v1/jobs", "/v1/queues", "/v1/schedules", "/v1/keys", "/v1/audit"):
        assert (await client.get(path)).status_code == 200
    assert await db.fetchval("SELECT count(*) FROM jobq.audit_log") == 0


async def test_pages_follow_newest_first_and_filters_narrow(
    service_factory: Factory, database_url: str, db: asyncpg.Connection
) -> None:
    service, admin, _ = await _keyed(service_factory, database_url)
    other = await create_key(database_url, "other-admin", ["admin"])
    for i in range(7):
        key = admin if i % 2 else other
        action = "pause" if i % 3 else "resume"
        await service.remote.post(f"/v1/queues/q{i % 2}/{action}", headers=bearer(key))
    everything = (await _audit(service.remote, admin, limit=500))["entries"]
    ids = [e["id"] for e in everything]
    assert len(ids) == 7 and ids == sorted(ids, reverse=True)
    seen: list[int] = []
    page = await _audit(service.remote, admin, limit=3)
    while True:
        seen += [e["id"] for e in page["entries"]]
        if page["next_before"] is None:
            break
        page = await _audit(service.remote, admin, limit=3, before=page["next_before"])
    assert seen == ids
    by_key = await _audit(service.remote, admin, key="ops")
    assert {e["key"] for e in by_key["entries"]} == {"ops"} and len(by_key["entries"]) == 3
    by_action = await _audit(service.remote, admin, action="resumeQueue")
    assert [e["action"] for e in by_action["entries"]] == ["resumeQueue"] * 3
    by_queue = await _audit(service.remote, admin, queue="q1", key="ops")
    assert len(by_queue["entries"]) == 3
    await db.execute(
        "UPDATE jobq.audit_log SET at = at - interval '2 hours' WHERE id = ANY($1)", ids[3:]
    )
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    recent = await _audit(service.remote, admin, since=since)
    assert [e["id"] for e in recent["entries"]] == ids[:3]


@pytest.mark.parametrize(
    "params",
    [
        {"since": "yesterday"},
        {"since": "1700000000"},
        {"limit": 0},
        {"limit": 501},
        {"before": -1},
        {"key": "no spaces"},
        {"action": "purge-queue"},
        {"queue": "x" * 129},
    ],
)
async def test_bad_filters_are_problems(service_factory: Factory, params: dict[str, Any]) -> None:
    service = await service_factory()
    response = await service.local.get("/v1/audit", params=params)
    assert_problem(response, 422, "validation_error")


async def test_only_admin_keys_read_the_log(service_factory: Factory, database_url: str) -> None:
    service, _, reader = await _keyed(service_factory, database_url)
    response = await service.remote.get("/v1/audit", headers=bearer(reader))
    assert_problem(response, 403, "forbidden")


async def test_retention_prunes_old_entries_only(
    service_factory: Factory, db: asyncpg.Connection
) -> None:
    service = await service_factory(prune_batch_size=2)
    for queue in ("a", "b", "c", "d", "e"):
        assert (await service.local.post(f"/v1/queues/{queue}/pause")).status_code == 200
    await db.execute("UPDATE jobq.audit_log SET at = now() - interval '91 days' WHERE queue <> 'e'")
    await db.execute("UPDATE jobq.audit_log SET at = now() - interval '89 days' WHERE queue = 'e'")
    pruner: AuditPruner = service.app.state.services.audit_pruner
    assert pruner.interval_seconds > 0  # the maintenance loop runs it
    assert await pruner.run_once() == 4
    assert await db.fetchval("SELECT array_agg(queue) FROM jobq.audit_log") == ["e"]


async def test_retention_of_zero_keeps_entries_for_good(
    service_factory: Factory, db: asyncpg.Connection
) -> None:
    service = await service_factory(audit_retention_days=0)
    assert (await service.local.post("/v1/queues/a/pause")).status_code == 200
    await db.execute("UPDATE jobq.audit_log SET at = now() - interval '10 years'")
    pruner: AuditPruner = service.app.state.services.audit_pruner
    assert pruner.interval_seconds == 0  # no maintenance loop for it
    assert await pruner.run_once() == 0
    assert await db.fetchval("SELECT count(*) FROM jobq.audit_log") == 1


async def test_an_action_stands_when_its_row_cannot_be_written(
    service_factory: Factory, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    service = await service_factory()
    lost = value(parse((await service.local.get("/metrics")).text), "jobq_audit_lost_total")
    await db.execute("ALTER TABLE jobq.audit_log RENAME TO audit_log_away")
    try:
        with caplog.at_level(logging.ERROR, logger="jobq.audit"):
            response = await service.local.post(
                "/v1/queues/q/pause", headers={"X-Request-ID": "lost-1"}
            )
    finally:
        await db.execute("ALTER TABLE jobq.audit_log_away RENAME TO audit_log")
    assert response.status_code == 200, response.text
    assert (await service.local.get("/v1/queues/q")).json()["paused"] is True
    (logged,) = [r for r in caplog.records if r.getMessage().startswith("could not record")]
    assert "POST /v1/queues/q/pause (200)" in logged.getMessage()
    assert getattr(logged, "fields", {}).get("audit_request_id") == "lost-1"
    metrics = parse((await service.local.get("/metrics")).text)
    assert value(metrics, "jobq_audit_lost_total") == lost + 1


async def test_a_path_postgresql_cannot_store_as_sent_is_recorded_cleaned(
    service_factory: Factory, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    service = await service_factory()
    with caplog.at_level(logging.ERROR, logger="jobq.audit"):
        response = await service.local.post("/v1/queues/a%00b%ED%A0%80c/pause")
    assert response.status_code == 422
    assert [r for r in caplog.records if r.name == "jobq.audit"] == []
    row = await db.fetchrow("SELECT queue, status FROM jobq.audit_log")
    assert row is not None and row["status"] == 422 and "\x00" not in row["queue"]


async def test_retention_waits_while_another_replica_maintains(
    service_factory: Factory, db: asyncpg.Connection
) -> None:
    service = await service_factory()
    assert (await service.local.post("/v1/queues/a/pause")).status_code == 200
    await db.execute("UPDATE jobq.audit_log SET at = now() - interval '100 days'")
    pruner: AuditPruner = service.app.state.services.audit_pruner
    await db.execute("SELECT pg_advisory_lock($1)", MAINTENANCE_LOCK_KEY)  # another leader
    try:
        assert await pruner.run_once() is None
        assert await db.fetchval("SELECT count(*) FROM jobq.audit_log") == 1
    finally:
        await db.execute("SELECT pg_advisory_unlock($1)", MAINTENANCE_LOCK_KEY)
    assert await pruner.run_once() == 1
