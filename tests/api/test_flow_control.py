"""Flow control over HTTP, on real connections: a queue's `max_running`, its
`max_running_per_key` and its rate limit hold under many concurrent leasers on two
replicas (sampled all along; half of them complete-and-lease), a key at its limit
never blocks the others, a waiting lease wakes when room opens (in the finishing
process without an announcement), and the queue's retry, lease and retention policy."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import assert_problem, enqueue, enqueue_batches, lease, put_settings

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


class Sampler:
    """Reads the queue's running jobs every few milliseconds on its own connection."""

    def __init__(self, conn: asyncpg.Connection, queue: str) -> None:
        self.conn = conn
        self.queue = queue
        self.most = 0
        self.most_per_key = 0
        self.samples = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            row = await self.conn.fetchrow(
                "SELECT (SELECT count(*) FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running') AS n,"
                "       (SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM jobq.jobs"
                "         WHERE queue = $1 AND state = 'running'"
                "           AND concurrency_key IS NOT NULL"
                "         GROUP BY concurrency_key) AS keys) AS per_key",
                self.queue,
            )
            assert row is not None
            self.most = max(self.most, row["n"])
            self.most_per_key = max(self.most_per_key, row["per_key"])
            self.samples += 1
            await asyncio.sleep(0.003)

    def stop(self) -> None:
        self._stop.set()


async def _work(
    client: httpx.AsyncClient,
    queue: str,
    until: float,
    rng: random.Random,
    max_jobs: int = 3,
    *,
    ack_lease: bool = False,
) -> int:
    """A worker: lease, hold each job a moment, complete; until the queue stays empty.
    With `ack_lease`, it completes its jobs in one ack call that leases its next ones."""
    done = 0
    body = {"queues": [queue], "max_jobs": max_jobs, "wait_seconds": 0.5, "worker_id": "w"}
    leases: list[dict[str, Any]] = []
    while time.monotonic() < until:
        if not leases:
            leases = (await client.post("/v1/leases", json=body)).json()["leases"]
        if not leases:
            continue
        await asyncio.sleep(rng.uniform(0.002, 0.02))
        if ack_lease:
            acks = [{"lease_id": x["lease_id"], "outcome": "complete"} for x in leases]
            answer = await client.post("/v1/acks", json={"acks": acks, "lease": body})
            assert [r["status"] for r in answer.json()["results"]] == [200] * len(acks)
            done += len(acks)
            leases = answer.json()["leases"]
            continue
        done += await _complete(client, leases)
        leases = []
    return done + await _complete(client, leases)  # what the last ack call leased


async def _complete(client: httpx.AsyncClient, leases: list[dict[str, Any]]) -> int:
    for leased in leases:
        done_answer = await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={})
        assert done_answer.status_code == 200, done_answer.text
    return len(leases)


async def _drain_with_two_replicas(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    db: asyncpg.Connection,
    database_url: str,
    queue: str,
    jobs: int,
    workers: int = 16,
) -> Sampler:
    """Two replicas, `workers` leasers spread over them, a sampler on its own connection."""
    replicas = [await client_factory(app_factory()) for _ in range(2)]
    sampler_conn = await asyncpg.connect(database_url.replace("+asyncpg", ""))
    sampler = Sampler(sampler_conn, queue)
    sampling = asyncio.create_task(sampler.run())
    rng = random.Random(16)
    until = time.monotonic() + 60
    checking = asyncio.Lock()
    try:

        async def worker(i: int) -> int:
            client = replicas[i % 2]
            done = 0
            while time.monotonic() < until:
                slice_ends = min(until, time.monotonic() + 1)
                done += await _work(client, queue, slice_ends, rng, ack_lease=i % 4 >= 2)
                async with checking:  # one connection, one statement at a time
                    left = await db.fetchval(
                        "SELECT count(*) FROM jobq.jobs WHERE queue = $1 AND state <> 'succeeded'",
                        queue,
                    )
                if left == 0:
                    return done
            return done

        finished = await asyncio.gather(*(worker(i) for i in range(workers)))
    finally:
        sampler.stop()
        await sampling
        await sampler_conn.close()
    assert sum(finished) == jobs  # each job once, by these workers
    states = await db.fetch("SELECT DISTINCT state::text FROM jobq.jobs")
    assert [r["state"] for r in states] == ["succeeded"]
    return sampler


async def test_max_running_holds_across_replicas_and_is_kept_full(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    database_url: str,
) -> None:
    settings = await put_settings(client, "encode", max_running=5)
    assert settings["max_running"] == 5 and settings["max_backlog"] is None
    await enqueue_batches(client, "encode", [{"type": "video"} for _ in range(300)])
    sampler = await _drain_with_two_replicas(
        app_factory, client_factory, db, database_url, "encode", 300
    )
    assert sampler.samples > 50
    assert sampler.most == 5  # never more, and the limit was reached


async def test_one_at_a_time_per_key_with_a_hot_key_and_many_cold_ones(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    database_url: str,
) -> None:
    await put_settings(client, "mail", max_running_per_key=1)
    hot = [{"type": "send", "concurrency_key": "big-customer", "priority": 10}] * 200
    cold = [{"type": "send", "concurrency_key": f"customer-{i}"} for i in range(60)]
    unkeyed = [{"type": "send"} for _ in range(20)]
    await enqueue_batches(client, "mail", hot + cold + unkeyed)

    # one lease: the hot key's best job, then every cold key's, then unkeyed ones
    first = await lease(client, "mail", max_jobs=100)
    keys = [x["job"]["concurrency_key"] for x in first]
    assert keys.count("big-customer") == 1
    assert len({k for k in keys if k and k.startswith("customer-")}) == 60
    assert keys.count(None) == 20 and len(first) == 81
    again = await client.post(
        "/v1/leases", json={"queues": ["mail"], "max_jobs": 10, "worker_id": "w"}
    )
    assert again.json()["leases"] == []
    assert again.headers["Jobq-Throttled"] == "max_running_per_key"
    for x in first:
        await client.post(f"/v1/leases/{x['lease_id']}/complete", json={})

    sampler = await _drain_with_two_replicas(
        app_factory, client_factory, db, database_url, "mail", 199
    )
    assert sampler.most_per_key == 1


async def test_the_rate_limit_holds_in_every_window_and_a_waiting_lease_gets_the_next_slot(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
) -> None:
    await put_settings(client, "sms", rate_limit={"jobs": 10, "per_seconds": 1})
    await enqueue_batches(client, "sms", [{"type": "text"} for _ in range(35)])
    other = await client_factory(app_factory(longpoll_recheck_seconds=30))

    first = await client.post(
        "/v1/leases", json={"queues": ["sms"], "max_jobs": 25, "worker_id": "w"}
    )
    assert len(first.json()["leases"]) == 10
    assert first.headers["Jobq-Throttled"] == "rate_limit"
    # the window is full: a waiting lease on the other replica gets jobs once it moves on,
    # woken by a timer (its re-check is 30 s away), not before
    started = time.monotonic()
    waited = await other.post(
        "/v1/leases",
        json={"queues": ["sms"], "max_jobs": 25, "wait_seconds": 5, "worker_id": "w"},
    )
    took = time.monotonic() - started
    assert len(waited.json()["leases"]) == 10
    assert 0.5 < took < 2.5, took

    async def leaser(c: httpx.AsyncClient) -> None:
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            await c.post(
                "/v1/leases",
                json={"queues": ["sms"], "max_jobs": 3, "wait_seconds": 0.3, "worker_id": "w"},
            )

    await asyncio.gather(*(leaser(c) for c in (client, other) for _ in range(4)))
    times = sorted(
        r["attempted_at"]
        for r in await db.fetch("SELECT attempted_at FROM jobq.jobs WHERE attempt > 0")
    )
    assert len(times) >= 25
    for i, start in enumerate(times):
        in_window = [t for t in times[i:] if t - start < timedelta(seconds=1)]
        assert len(in_window) <= 10, (start, len(in_window))


async def test_a_waiting_lease_wakes_when_a_running_job_of_a_full_queue_finishes(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    client: httpx.AsyncClient,
) -> None:
    other = await client_factory(app_factory(longpoll_recheck_seconds=30))
    await _finish_beside_a_waiting_lease(client, other)


async def test_a_freed_slot_goes_to_a_lease_waiting_in_the_same_process_unannounced(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> None:
    """No announcement is heard here (and the waiting lease re-checks only every 30 s):
    the process that finished the job hands the slot to its own waiting lease."""
    app = app_factory(longpoll_recheck_seconds=30, longpoll_poll_seconds=30)
    client = await client_factory(app)
    wakeups = app.state.services.wakeups
    deadline = time.monotonic() + 10
    while not wakeups.listening and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # up first, so that nothing sets it after this
    wakeups.listening = False  # as if the LISTEN connection were down: nothing heard
    await _finish_beside_a_waiting_lease(client, client)


async def _finish_beside_a_waiting_lease(
    client: httpx.AsyncClient, waiter: httpx.AsyncClient
) -> None:
    """A queue at its `max_running` of 1, a lease waiting on `waiter`: the job's finish
    through `client` gets it the next job at once, not at its 30 s re-check."""
    await put_settings(client, "one", max_running=1)
    await enqueue(client, "one")
    await enqueue(client, "one")
    (running,) = await lease(client, "one", max_jobs=5)
    body = {"queues": ["one"], "max_jobs": 5, "wait_seconds": 10, "worker_id": "w2"}
    waiting = asyncio.create_task(waiter.post("/v1/leases", json=body))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # at its limit: nothing to lease
    started = time.monotonic()
    await client.post(f"/v1/leases/{running['lease_id']}/complete", json={})
    answer = await waiting
    assert len(answer.json()["leases"]) == 1
    assert time.monotonic() - started < 2.0  # woken by the finish, not the 30 s re-check


async def test_limits_in_force_show_in_the_queue_and_survive_a_new_replica(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    client: httpx.AsyncClient,
) -> None:
    await put_settings(client, "q", max_running=2, rate_limit={"jobs": 100, "per_seconds": 60})
    for _ in range(4):
        await enqueue(client, "q")
    assert len(await lease(client, "q", max_jobs=4)) == 2
    fresh = await client_factory(app_factory())  # a replica started after the change
    refused = await fresh.post(
        "/v1/leases", json={"queues": ["q"], "max_jobs": 4, "worker_id": "w"}
    )
    assert refused.json()["leases"] == [] and refused.headers["Jobq-Throttled"] == "max_running"
    shown = (await fresh.get("/v1/queues/q")).json()
    assert shown["limits"] == {
        "max_running": 2,
        "max_running_per_key": None,
        "rate_limit": {"jobs": 100, "per_seconds": 60.0, "used": 2},
        "throttled": {"max_running": 2, "max_running_per_key": 0, "rate_limit": 0},
    }
    cleared = await put_settings(client, "q", max_running=None, rate_limit=None)
    assert cleared["max_running"] is None and cleared["rate_limit"] is None
    assert len(await lease(fresh, "q", max_jobs=4)) == 2  # no limit any more, at once


async def test_settings_change_only_what_is_sent_and_refuse_bad_values(
    client: httpx.AsyncClient,
) -> None:
    await put_settings(client, "s", max_backlog=100, max_running=3)
    kept = await put_settings(client, "s", max_attempts=7)
    assert (kept["max_backlog"], kept["max_running"], kept["max_attempts"]) == (100, 3, 7)
    for body, field in [
        ({"max_running": 0}, "max_running"),
        ({"max_running_per_key": "1"}, "max_running_per_key"),
        ({"rate_limit": {"jobs": 10}}, "rate_limit"),
        ({"rate_limit": {"jobs": 10, "per_seconds": 0}}, "rate_limit"),
        ({"backoff_jitter": 1}, "backoff_jitter"),
        ({"lease_seconds": 10**9}, "lease_seconds"),
        ({"max_runing": 3}, "max_runing"),
    ]:
        response = await client.put("/v1/queues/s/settings", json=body)
        problem = assert_problem(response, 422, "validation_error")
        assert problem["errors"][0]["loc"][:2] == ["body", field], (body, problem)
    too_long = await client.post(
        "/v1/queues/s/jobs", json={"type": "t", "concurrency_key": "k" * 256}
    )
    assert assert_problem(too_long, 422, "validation_error")["errors"][0]["loc"] == [
        "body",
        "concurrency_key",
    ]


async def test_the_queue_policy_fills_in_what_a_job_leaves_out(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    await put_settings(
        client, "p", max_attempts=9, lease_seconds=17, backoff_base_seconds=100,
        backoff_cap_seconds=100, backoff_jitter=0,
    )  # fmt: skip
    one = await enqueue(client, "p")
    own = await enqueue(client, "p", max_attempts=2, lease_seconds=5)
    response = await client.post("/v1/queues/p/jobs/batch", json={"jobs": [{"type": "t"}]})
    (batched,) = response.json()["jobs"]
    parent = await enqueue(client, "other")
    child = await enqueue(client, "p", depends_on=[parent["id"]])  # through jobq.enqueue
    sql = await db.fetchval("SELECT id FROM jobq.enqueue('p', 't')")
    rows = {
        r["id"]: (r["max_attempts"], r["lease_seconds"])
        for r in await db.fetch("SELECT id, max_attempts, lease_seconds FROM jobq.jobs")
    }
    assert rows[one["id"]] == rows[batched["id"]] == rows[child["id"]] == rows[sql] == (9, 17)
    assert rows[own["id"]] == (2, 5)

    await db.execute("DELETE FROM jobq.jobs WHERE queue = 'p' AND id <> $1", one["id"])
    (leased,) = await lease(client, "p")
    failed = await client.post(
        f"/v1/leases/{leased['lease_id']}/fail", json={"error": {"type": "Flaky"}}
    )
    run_at = datetime.fromisoformat(failed.json()["run_at"])
    updated = datetime.fromisoformat(failed.json()["updated_at"])
    assert abs((run_at - updated).total_seconds() - 100) < 1  # the queue's backoff


async def test_retention_per_queue(
    client: httpx.AsyncClient, db: asyncpg.Connection, pruner: Any
) -> None:
    await put_settings(client, "short", retain_succeeded_seconds=0)
    for queue in ("short", "default"):
        await enqueue(client, queue)
        (leased,) = await lease(client, queue)
        await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={})
    await db.execute("UPDATE jobq.jobs SET finished_at = now() - interval '1 minute'")
    await pruner.run_once()
    left = await db.fetch("SELECT queue FROM jobq.jobs")
    assert [r["queue"] for r in left] == ["default"]  # the service keeps them a day
