"""Push delivery statistics over HTTP (`GET /v1/queues/{queue}`, `push`): two replicas
(two apps on one database) deliver a queue's jobs to a real loopback endpoint that
answers each outcome class; what the queue's figures say is what the endpoint saw,
summed over both replicas."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.delivery import new_secret
from tests.delivery_endpoint import Answer, Endpoint, Received, serving

pytestmark = pytest.mark.pgbouncer

SECRET = new_secret()
TIMEOUT_SECONDS = 1.0
# each job's answer, and how many jobs get it; the hang first, so that the replica that
# takes it is busy while the other delivers
ANSWERS = {"hang": 1, "ok": 6, "accepted": 2, "busy": 2, "client": 2, "error": 2, "close": 1}


@dataclass
class Classes(Endpoint):
    """Answers each job as its payload says, and notes each answer's class (a busy
    job: 429 once, then 200)."""

    seen: Counter[str] = field(default_factory=Counter)
    busy_once: set[int] = field(default_factory=set)

    async def answer(self, got: Received) -> Answer:
        if got.path != "/classes":
            return await super().answer(got)
        body = got.json()
        payload, job = body["payload"], body["job_id"]
        assert isinstance(payload, dict) and isinstance(job, int)
        kind = payload["answer"]
        if kind == "busy" and job not in self.busy_once:
            self.busy_once.add(job)
            self.seen["retry_later"] += 1
            return 429, {"retry-after": "1"}, b"slow down"
        if kind in ("ok", "busy"):
            self.seen["2xx"] += 1
            return 200, {}, b"{}"
        if kind == "accepted":
            self.seen["202"] += 1
            return 202, {}, b""
        if kind == "client":
            self.seen["4xx"] += 1
            return 404, {}, b"no"
        if kind == "error":
            self.seen["5xx"] += 1
            return 500, {}, b"boom"
        if kind == "hang":
            self.seen["timeout"] += 1
            await asyncio.sleep(TIMEOUT_SECONDS * 3)
            return 200, {}, b"{}"
        self.seen["connection"] += 1
        return None


@pytest.fixture
async def endpoint() -> AsyncIterator[Classes]:
    async with serving(Classes(secrets=[SECRET])) as served:
        yield served


async def _settled(client: httpx.AsyncClient, ids: list[int]) -> None:
    """Every job delivered for the last time: succeeded, failed, or running (202)."""
    deadline = time.monotonic() + 30
    while True:
        states = [(await client.get(f"/v1/jobs/{i}")).json() for i in ids]
        if all(
            s["state"] in ("succeeded", "failed")
            or (s["state"] == "running" and s["payload"]["answer"] == "accepted")
            for s in states
        ):
            return
        assert time.monotonic() < deadline, states
        await asyncio.sleep(0.05)


async def test_the_queue_shows_every_replicas_deliveries_by_class(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    endpoint: Classes,
) -> None:
    settings = {
        "push_allowed_targets": ("http://127.0.0.1:*",),
        "push_breaker_failures": 100,
        "push_concurrency": 1,
        "push_stats_flush_seconds": 3600,  # written when the test says
    }
    apps = [app_factory(**settings), app_factory(**settings)]
    clients: list[httpx.AsyncClient] = [await client_factory(a) for a in apps]
    target = {"url": endpoint.base + "/classes", "secrets": [SECRET]}
    target["timeout_seconds"] = TIMEOUT_SECONDS  # type: ignore[assignment]
    set_ = await clients[0].put("/v1/queues/hooks/settings", json={"push": target})
    assert set_.status_code == 200, set_.text
    before = (await clients[1].get("/v1/queues/hooks")).json()["push"]
    assert before["last_hour"]["deliveries"] == 0
    assert before["last_hour"]["latency_seconds"] == {"p50": None, "p95": None}

    ids = []
    for kind, jobs in ANSWERS.items():
        for _ in range(jobs):
            answer = await clients[0].post(
                "/v1/queues/hooks/jobs",
                json={"type": "t", "payload": {"answer": kind}, "max_attempts": 1},
            )
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
    await _settled(clients[0], ids)
    assert sum(endpoint.seen.values()) == len(endpoint.requests) == 18
    # each replica's counts, written in turn: the figures are their sum
    await apps[0].state.services.dispatcher.flush()
    first = (await clients[1].get("/v1/queues/hooks")).json()["push"]["last_hour"]
    # replica 0's own deliveries (all of them, when replica 1 learnt of the target late)
    assert 0 < first["deliveries"] <= 18
    await apps[1].state.services.dispatcher.flush()
    for client in clients:
        answer = await client.get("/v1/queues/hooks")
        assert answer.status_code == 200, answer.text
        push = answer.json()["push"]
        assert push["target_host"] == "127.0.0.1"
        assert SECRET not in answer.text and "/classes" not in answer.text
        hour = push["last_hour"]
        assert hour["deliveries"] == 18
        assert {k: v for k, v in hour["classes"].items() if v} == dict(endpoint.seen)
        assert hour["classes"]["refused"] == 0
        latency = hour["latency_seconds"]
        # the slowest (p95 of 18: the 18th) is the timeout; most answer at once
        assert latency["p50"] < 0.5 and TIMEOUT_SECONDS / 1.19 <= latency["p95"] <= 2.0
        assert 0 < push["last_minute"]["deliveries"] <= 18
        assert push["breaker"] == {"state": "closed", "open_until": None}


async def test_a_pulled_queue_has_no_push_figures(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/queues/pulled")
    assert answer.status_code == 200 and answer.json()["push"] is None
