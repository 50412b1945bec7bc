"""Request ids, one JSON line per event (never a payload, key or token), text on a TTY."""

from __future__ import annotations

import io
import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.core import logging as jobq_logging
from app.core.logging import JsonFormatter
from app.maintenance import MAINTENANCE_LOCK_KEY, Reaper
from app.maintenance.reaper import LOST_AFTER_REFUSED_PASSES
from tests.helpers import enqueue, lease
from tests.processes.chaos.evidence import parse_reaper_line

SECRETS = {
    "payload": "payload-7f3a",
    "metadata": "metadata-91bc",
    "key": "idem-key-44d0",
    "result": "result-c2e8",
    "message": "message-5b19",
    "details": "details-0a6f",
}


class Lines(io.StringIO):
    """What jobq's loggers wrote, as parsed JSON lines."""

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        entries = [json.loads(line) for line in self.getvalue().splitlines()]
        jobq = [e for e in entries if e["logger"].startswith("jobq")]
        return [e for e in jobq if name is None or e.get("event") == name]


@pytest.fixture
def json_log() -> Iterator[Lines]:
    """Every record at INFO and above, formatted as `jobq serve` does in JSON mode."""
    stream = Lines()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


async def test_a_request_id_is_taken_from_the_client_or_made(
    client: httpx.AsyncClient, json_log: Lines
) -> None:
    given = await client.get("/v1/jobs", headers={"X-Request-ID": "trace-42.a:b"})
    assert given.headers["x-request-id"] == "trace-42.a:b"
    made = [(await client.get("/v1/jobs")).headers["x-request-id"] for _ in range(2)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in made) and made[0] != made[1]
    for insane in ("has spaces", "x" * 129, "new\nline"):
        echoed = (await client.get("/healthz", headers={"X-Request-ID": insane})).headers
        assert re.fullmatch(r"[0-9a-f]{32}", echoed["x-request-id"]), insane
    missing = await client.get("/v1/jobs/999")  # errors carry it too
    assert missing.status_code == 404 and len(missing.headers["x-request-id"]) == 32
    ids = [e["request_id"] for e in json_log.events("request") if e["route"] == "/v1/jobs"]
    assert ids == ["trace-42.a:b", *made]


async def test_each_request_is_one_json_line(client: httpx.AsyncClient, json_log: Lines) -> None:
    response = await client.get("/v1/jobs/7", headers={"X-Request-ID": "r-1"})
    (line,) = json_log.events("request")
    assert set(line) == {
        "ts", "level", "logger", "pid", "event", "message", "request_id",
        "method", "path", "route", "status", "duration_ms", "client",
    }  # fmt: skip
    assert line["ts"].endswith("Z") and line["level"] == "info"
    assert (line["logger"], line["request_id"]) == ("jobq.access", "r-1")
    assert (line["method"], line["path"], line["route"]) == (
        "GET",
        "/v1/jobs/7",
        "/v1/jobs/{job_id}",
    )
    assert line["status"] == response.status_code == 404
    assert line["duration_ms"] > 0
    assert line["message"].startswith("GET /v1/jobs/7 404 ")


async def test_no_payload_key_or_token_is_ever_logged(
    client: httpx.AsyncClient, reaper: Reaper, db: asyncpg.Connection, json_log: Lines
) -> None:
    job = {
        "payload": {"x": SECRETS["payload"]},
        "metadata": {"m": SECRETS["metadata"]},
        "idempotency_key": SECRETS["key"],
        "max_attempts": 1,
    }
    await enqueue(client, "s", **job)
    await enqueue(client, "s", max_attempts=1)
    await enqueue(client, "s", max_attempts=1)
    done, failed, expired = await lease(client, "s", max_jobs=3)
    await client.post(f"/v1/leases/{done['lease_id']}/complete", json={"result": SECRETS["result"]})
    error = {"type": "Boom", "message": SECRETS["message"], "details": {"d": SECRETS["details"]}}
    answer = await client.post(
        f"/v1/leases/{failed['lease_id']}/fail",
        json={"error": error, "retryable": False},
        headers={"X-Request-ID": "fail-1"},
    )
    assert answer.json()["state"] == "failed"
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1",
                     expired["job"]["id"])  # fmt: skip
    await reaper.run_once()

    text = "\n".join(json.dumps(e) for e in json_log.events())
    for secret in SECRETS.values():
        assert secret not in text
    for lease_ in (done, failed, expired):
        assert lease_["lease_id"].partition("-")[2] not in text
    paths = [e["path"] for e in json_log.events("request") if e["method"] == "POST"]
    assert f"/v1/leases/{done['job']['id']}-…/complete" in paths

    dead = {e["job_id"]: e for e in json_log.events("job.dead")}
    assert set(dead) == {failed["job"]["id"], expired["job"]["id"]}
    by_fail = dead[failed["job"]["id"]]
    assert (by_fail["queue"], by_fail["cause"], by_fail["error_type"]) == ("s", "failed", "Boom")
    assert by_fail["request_id"] == "fail-1"  # logged while that request was served
    assert by_fail["level"] == "warning"
    (expiry,) = json_log.events("lease.expired")
    assert (expiry["job_id"], expiry["queue"], expiry["state"]) == (
        expired["job"]["id"],
        "s",
        "failed",
    )
    assert "request_id" not in expiry
    (run,) = json_log.events("reaper.run")
    assert (run["leader"], run["requeued"], run["failed"]) == (True, 0, 1)
    (batch,) = json_log.events("reaper.batch")
    assert batch["job_ids"] == str(expired["job"]["id"])


async def test_leadership_is_logged_when_gained_or_lost_not_on_turns(
    reaper: Reaper, db: asyncpg.Connection, json_log: Lines
) -> None:
    """Two replicas take the per-batch lock in turns: one pass that finds it held is
    another replica's turn, not a lost leadership; several in a row are."""

    async def refused_passes(count: int) -> None:
        await db.execute("SELECT pg_advisory_lock($1)", MAINTENANCE_LOCK_KEY)  # another replica
        try:
            for _ in range(count):
                assert (await reaper.run_once()).leader is False
        finally:
            await db.execute("SELECT pg_advisory_unlock($1)", MAINTENANCE_LOCK_KEY)

    await reaper.run_once()
    await reaper.run_once()
    await refused_passes(1)  # the other replica's turn
    await reaper.run_once()
    await refused_passes(LOST_AFTER_REFUSED_PASSES - 1)
    await reaper.run_once()
    assert [e["leader"] for e in json_log.events("leadership.changed")] == [True]
    await refused_passes(LOST_AFTER_REFUSED_PASSES)  # the other replica leads now
    await refused_passes(2)
    await reaper.run_once()
    changes = json_log.events("leadership.changed")
    assert [e["leader"] for e in changes] == [True, False, True]
    assert [e["message"].split()[1:4] for e in changes] == [
        ["leads", "maintenance", "(the"],
        ["does", "not", "lead"],
        ["leads", "maintenance", "(the"],
    ]
    assert json_log.events("reaper.run") == []  # passes that reaped nothing are DEBUG


async def test_the_access_log_can_be_turned_off(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any], json_log: Lines
) -> None:
    client = await client_factory(app_factory(access_log=False))
    response = await client.get("/v1/jobs")
    assert response.status_code == 200 and len(response.headers["x-request-id"]) == 32
    assert json_log.events("request") == []


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_text_on_a_terminal_json_elsewhere() -> None:
    tty = Terminal()
    assert jobq_logging.configure("auto", "INFO", stream=tty) == "text"
    logging.getLogger("jobq.reaper").info(
        "reaped replica=h:1 batch_started=1.5 batch_ended=2.5 requeued=1 failed=0 job_ids=7"
    )
    line = tty.getvalue().strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO jobq\.reaper: reaped .*", line)
    batch = parse_reaper_line(line)  # the chaos harness still reads text logs
    assert batch is not None and batch.job_ids == [7]

    pipe = io.StringIO()
    assert jobq_logging.configure("auto", "INFO", stream=pipe) == "json"
    jobq_logging.event(logging.getLogger("jobq.x"), "thing", "a %s", "b", n=1)
    assert {k: v for k, v in json.loads(pipe.getvalue()).items() if k not in ("ts", "pid")} == {
        "level": "info", "logger": "jobq.x", "event": "thing", "message": "a b", "n": 1,
    }  # fmt: skip
    assert tty.getvalue().strip() == line  # the earlier handler was replaced, not added to
    assert jobq_logging.configure("text", "INFO", stream=pipe) == "text"
    assert jobq_logging.configure("json", "INFO", stream=tty) == "json"


@pytest.mark.usefixtures("restore_root")
def test_an_event_is_one_line_through_every_handler_and_filter() -> None:
    pipe = io.StringIO()
    logging.getLogger().handlers.clear()  # pytest's own capture: restored after
    jobq_logging.configure("json", "INFO", stream=pipe)
    log = logging.getLogger("jobq.access")
    (handler,) = logging.getLogger().handlers
    seen: list[str] = []

    def watch(record: logging.LogRecord) -> bool:
        seen.append(record.getMessage())
        return True

    handler.addFilter(watch)
    token = jobq_logging.REQUEST_ID.set("r-9")
    try:
        jobq_logging.event(log, "request", "%s %d%%", "GET /v1/jobs", 200, status=200, ts="no")
        jobq_logging.event(log, "plain", "100% done")  # no arguments: the message as it is
    finally:
        jobq_logging.REQUEST_ID.reset(token)
    first, second = [json.loads(x) for x in pipe.getvalue().splitlines()]
    assert first.pop("ts") <= second.pop("ts")
    assert first == {
        "level": "info", "logger": "jobq.access", "pid": os.getpid(), "event": "request",
        "message": "GET /v1/jobs 200%", "request_id": "r-9", "status": 200,
    }  # fmt: skip
    assert second["message"] == "100% done"
    assert seen == ["GET /v1/jobs 200%", "100% done"]  # a filter sees every event
    other = io.StringIO()
    logging.getLogger().addHandler(logging.StreamHandler(other))  # a second handler
    jobq_logging.event(log, "seen", "by both")
    assert other.getvalue() == "by both\n"
    assert json.loads(pipe.getvalue().splitlines()[-1])["event"] == "seen"
    logging.getLogger().setLevel(logging.WARNING)  # below the level: nothing at all
    jobq_logging.event(log, "quiet", "not written")
    assert "quiet" not in pipe.getvalue()


def test_timestamps_are_datetimes_own_to_the_microsecond() -> None:
    rng = random.Random(7)
    moments = [0.0, 1.5, 1795321701.000001, 1795321701.9999994, 1795321701.9999996]
    moments += [1795321701 + rng.random() * 3 for _ in range(5000)]  # a few seconds' worth
    moments += [rng.uniform(0, 4e9) for _ in range(5000)]
    for moment in moments:
        expected = datetime.fromtimestamp(moment, UTC).isoformat(timespec="microseconds")
        assert jobq_logging.timestamp(moment) == expected.replace("+00:00", "Z"), moment


TOKEN = "2-329eac80c92c43138a31f98ec3d16578"
TOKEN_FORMS = [
    TOKEN,
    "2-329eac80-c92c-4313-8a31-f98ec3d16578",
    "2-{329eac80-c92c-4313-8a31-f98ec3d16578}",
    "2-urn:uuid:329eac80-c92c-4313-8a31-f98ec3d16578",
]


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize("token", TOKEN_FORMS)
async def test_a_token_in_the_path_is_cut_whatever_became_of_the_request(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    database_url: str,
    json_log: Lines,
    token: str,
) -> None:
    from tests.helpers import create_key

    key = await create_key(database_url, "worker", ["work"])
    client = await client_factory(app_factory())
    refused = [
        await client.post(f"/v1/leases/{token}/heartbeat", json={}),  # 401: no key
        await client.post(
            f"/v1/leases/{token}/heartbeat",
            json={},
            headers={"Authorization": "Bearer jobq_0000000000000000_bogus"},
        ),  # 401: a bad key
        # no such route (with a key: a body without one is refused first)
        await client.post(
            f"/v1/leases/{token}/nope", json={}, headers={"Authorization": f"Bearer {key}"}
        ),
        await client.get(f"/v1/leases/{token}"),  # nor this one
    ]
    assert [r.status_code for r in refused] == [401, 401, 404, 404]
    logged = [e["path"] for e in json_log.events("request")]
    assert logged == [
        "/v1/leases/2-…/heartbeat",
        "/v1/leases/2-…/heartbeat",
        "/v1/leases/2-…/nope",
        "/v1/leases/2-…",
    ]
    assert "329eac80" not in json.dumps(json_log.events())  # jobq's lines, not httpx's


async def test_only_token_shaped_segments_are_cut(
    client: httpx.AsyncClient, json_log: Lines
) -> None:
    await client.get("/v1/queues/2024-reports")
    await client.get("/v1/queues/12-329eac80c92c43138a31f98ec3d1657")  # 31 hex digits
    await client.get("/v1/queues/\u0661-329eac80c92c43138a31f98ec3d16570")  # not ASCII
    paths = [e["path"] for e in json_log.events("request")]
    assert paths == [
        "/v1/queues/2024-reports",
        "/v1/queues/12-329eac80c92c43138a31f98ec3d1657",
        "/v1/queues/\u0661-329eac80c92c43138a31f98ec3d16570",
    ]


async def test_a_token_is_cut_in_any_form_a_uuid_is_read(
    client: httpx.AsyncClient, json_log: Lines
) -> None:
    lease = "329eac80-c92c-4313-8a31-f98ec3d16570"
    for uuid_part in (lease.replace("-", ""), lease, lease.upper(), f"{{{lease}}}"):
        await client.get(f"/v1/leases/5-{uuid_part}/x")
    await client.get(f"/v1/leases/5-urn:uuid:{lease}/6-{lease}")
    paths = [e["path"] for e in json_log.events("request")]
    assert paths == [*["/v1/leases/5-…/x"] * 4, "/v1/leases/5-…/6-…"]
