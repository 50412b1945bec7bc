"""The Python SDK's workflow and operator calls against a real `jobq serve`: dependencies
and their parents' results, waiting for a result, schedules, queue settings and limits,
acting on jobs and queues; typed answers throughout."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

import jobq_client._admin_calls
from app.delivery import new_secret
from jobq_client import (
    AsyncClient,
    Client,
    Complete,
    Fail,
    JobSpec,
    NotFound,
    PushHealth,
    QueueSettings,
    RateLimit,
    Ref,
    RetryPolicy,
    ScheduleNotFound,
    ValidationError,
)
from tests.sdk_support import Service, running_service

# The SDK's logic against a service, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")

FAST_RETRY = RetryPolicy(max_retries=2, backoff_seconds=0.05, max_backoff_seconds=0.2)


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from running_service(database_url, tmp_path_factory.mktemp("ops") / "serve.log")


@pytest.fixture
def jobq(service: Service, db: asyncpg.Connection) -> Iterator[Client]:
    with Client(service.url, retry=FAST_RETRY) as client:
        yield client


def test_a_workflow_in_one_batch_with_parents_results(jobq: Client) -> None:
    items = jobq.enqueue_many(
        "video",
        [
            JobSpec("download", {"url": "a.mp4"}),
            JobSpec("transcode", {"height": 720}, depends_on=[Ref(0)]),
            JobSpec("publish", depends_on=[Ref(1)], on_parent_failure="run"),
        ],
    )
    assert [i.state for i in items] == ["queued", "waiting", "waiting"]
    later = jobq.enqueue(
        "video", "notify", depends_on=[items[2].id], concurrency_key="ada", fairness_key="acme"
    )
    assert later.job is not None and later.job.waiting_for == 1
    assert (later.job.concurrency_key, later.job.fairness_key) == ("ada", "acme")

    (download,) = jobq.lease(["video"], worker_id="w")
    jobq.complete(download.lease_id, {"bytes": 10})
    (transcode,) = jobq.lease(["video"], worker_id="w")
    assert [(p.id, p.state, p.result) for p in transcode.parents] == [
        (items[0].id, "succeeded", {"bytes": 10})
    ]
    jobq.fail(transcode.lease_id, error_type="Codec", retryable=False)
    (publish,) = jobq.lease(["video"], worker_id="w")  # runs anyway
    assert publish.job.on_parent_failure == "run" and publish.parents[0].state == "failed"
    deps = jobq.get_dependencies(items[1].id)
    assert [p.id for p in deps.parents] == [items[0].id]
    assert [c.id for c in deps.children] == [items[2].id]
    failed = jobq.get_job(items[1].id)
    assert failed.last_error is not None and failed.last_error.type == "Codec"


def test_wait_and_run_return_the_finished_job(jobq: Client, service: Service) -> None:
    created = jobq.enqueue("thumbs", "resize", {"w": 1})

    def worker() -> None:
        with Client(service.url) as other:
            time.sleep(0.3)
            (leased,) = other.lease(["thumbs"], worker_id="w", wait_seconds=5)
            other.ack([Complete(leased.lease_id, {"ok": leased.job.payload})])

    # joined before the test ends: a thread still logging then writes to a closed capture
    first = threading.Thread(target=worker)
    first.start()
    started = time.monotonic()
    done = jobq.wait(created.id, timeout=10)
    assert done.finished and done.state == "succeeded" and done.result == {"ok": {"w": 1}}
    assert time.monotonic() - started < 5

    unfinished = jobq.wait(jobq.enqueue("idle", "t").id, timeout=0.3)
    assert not unfinished.finished and unfinished.state == "queued"

    second = threading.Thread(target=worker)
    second.start()
    ran = jobq.run("thumbs", "resize", {"w": 2}, timeout=10)
    assert ran.result == {"ok": {"w": 2}}
    for thread in (first, second):
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_schedules_round_trip(jobq: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    made = jobq.set_schedule(
        "nightly", queue="reports", type="rollup", cron="0 3 * * *",
        timezone="Europe/Paris", payload={"span": "day"}, catch_up="all",
    )  # fmt: skip
    assert (made.cron, made.timezone, made.catch_up, made.paused) == (
        "0 3 * * *",
        "Europe/Paris",
        "all",
        False,
    )
    assert len(made.next_runs) == 5 and made.next_runs[0] > datetime.now(UTC)
    assert [s.name for s in jobq.list_schedules()] == ["nightly"]
    jobq.set_schedule("weekly", queue="reports", type="rollup", cron="0 3 * * mon")
    monkeypatch.setattr(jobq_client._admin_calls, "SCHEDULES_PAGE", 1)
    assert [s.name for s in jobq.list_schedules()] == ["nightly", "weekly"]  # page by page
    jobq.delete_schedule("weekly")
    assert jobq.pause_schedule("nightly").paused
    assert jobq.resume_schedule("nightly").next_runs
    assert jobq.get_schedule("nightly").payload == {"span": "day"}
    with pytest.raises(ValidationError):
        jobq.set_schedule("bad", queue="q", type="t", cron="61 * * * *")
    jobq.delete_schedule("nightly")
    with pytest.raises(ScheduleNotFound):
        jobq.get_schedule("nightly")


def test_queue_settings_limits_and_operator_calls(jobq: Client) -> None:
    settings = jobq.set_queue_settings(
        "enc", max_running=1, rate_limit=RateLimit(100, 60), max_attempts=3
    )
    assert settings == QueueSettings(
        "enc", max_running=1, rate_limit=RateLimit(100, 60.0), max_attempts=3
    )
    assert jobq.set_queue_settings("enc", max_attempts=None).max_running == 1
    with pytest.raises(TypeError, match="max_runing"):
        jobq.set_queue_settings("enc", max_runing=2)
    first = jobq.enqueue("enc", "t")
    jobq.enqueue("enc", "t")
    assert first.job is not None and first.job.max_attempts == 5  # the service's default
    assert len(jobq.lease(["enc"], worker_id="w", max_jobs=5)) == 1  # max_running
    stats = jobq.get_queue("enc")
    assert stats.counts["running"] == 1 and stats.limits is not None
    assert stats.limits["throttled"]["max_running"] == 1
    assert "enc" in [q.queue for q in jobq.list_queues()]
    overview = jobq.get_stats()
    assert [q.queue for q in overview.queues] == [q.queue for q in jobq.list_queues()]
    assert "oldest_transaction_age_seconds" in overview.database
    assert jobq.get_queue_settings("enc").rate_limit == RateLimit(100, 60.0)

    jobq.pause_queue("enc")
    assert jobq.get_queue("enc").paused
    jobq.resume_queue("enc")
    assert jobq.purge_queue("enc") == 1

    failed = jobq.enqueue("redo", "t", max_attempts=1)
    (leased,) = jobq.lease(["redo"], worker_id="w")
    jobq.ack([Fail(leased.lease_id, "Boom", retryable=False)])
    assert jobq.redrive_failed("redo", error_type="Boom") == 1
    (again,) = jobq.lease(["redo"], worker_id="w")
    jobq.ack([Fail(again.lease_id, "Boom", retryable=False)])
    retried = jobq.retry_job(failed.id, run_at=datetime.now(UTC) + timedelta(hours=1))
    assert retried.state == "queued" and retried.run_at > datetime.now(UTC)
    assert retried.attempt == 2  # its attempts so far stay counted
    jobq.cancel_job(failed.id)
    assert jobq.retry_job(failed.id, reset_attempts=True).attempt == 0
    jobq.delete_job(failed.id)
    assert jobq.list_jobs(queue="redo").jobs == []


def test_the_async_client_has_the_same_calls(service: Service, db: asyncpg.Connection) -> None:
    async def main() -> None:
        async with AsyncClient(service.url, retry=FAST_RETRY) as jobq:
            parent = await jobq.enqueue("a", "t")
            child = await jobq.enqueue("a", "t", depends_on=[parent.id])
            assert child.state == "waiting"
            (leased,) = await jobq.lease(["a"], worker_id="w")
            await jobq.complete(leased.lease_id, 7)
            assert (await jobq.wait(parent.id, timeout=1)).result == 7
            assert (await jobq.get_dependencies(child.id)).parents[0].id == parent.id
            assert (await jobq.set_queue_settings("a", max_running_per_key=1)).max_running_per_key
            assert "a" in [q.queue for q in (await jobq.get_stats()).queues]
            made = await jobq.set_schedule("s", queue="a", type="t", cron="@hourly")
            assert [s.name for s in await jobq.list_schedules()] == [made.name]
            await jobq.delete_schedule("s")

    asyncio.run(main())


def test_the_audit_log_page_by_page(jobq: Client, service: Service) -> None:
    for queue in ("a", "b", "a"):
        jobq.pause_queue(queue)
    jobq.set_queue_settings("a", max_running=2)
    page = jobq.list_audit(limit=2)
    assert [e.action for e in page.entries] == ["setQueueSettings", "pauseQueue"]
    assert page.entries[0].detail == {"max_running": 2} and page.entries[0].queue == "a"
    assert page.entries[0].key is None and page.entries[0].status == 200
    assert page.next_before == page.entries[1].id
    every = list(jobq.iter_audit(page_size=1))  # one entry a page
    assert [(e.action, e.queue) for e in every] == [
        ("setQueueSettings", "a"), ("pauseQueue", "a"), ("pauseQueue", "b"), ("pauseQueue", "a"),
    ]  # fmt: skip
    assert [e.queue for e in jobq.iter_audit(action="pauseQueue", queue="a")] == ["a", "a"]
    assert list(jobq.iter_audit(since=datetime.now(UTC) + timedelta(hours=1))) == []
    with pytest.raises(ValidationError):
        jobq.list_audit(action="not an action")

    async def main() -> None:
        async with AsyncClient(service.url, retry=FAST_RETRY) as client:
            page = await client.list_audit(key=None, limit=1)
            assert [e.id for e in page.entries] == [every[0].id]
            found = [e.id async for e in client.iter_audit(page_size=3)]
            assert found == [e.id for e in every]

    asyncio.run(main())


async def _pushed_with_open_breaker(db: asyncpg.Connection, queue: str) -> None:
    """A pushed queue whose breaker a run of failures opened (what the dispatchers leave)."""
    await db.execute(
        "INSERT INTO jobq.push_targets (queue, url, headers, timeout_seconds, secrets)"
        " VALUES ($1, 'https://hooks.example.com/in', '{\"x-env\": \"test\"}', 7, $2)",
        queue,
        [new_secret()],
    )
    await db.execute(
        "INSERT INTO jobq.delivery_breakers (target, failures, trips, open_until, last_error)"
        " VALUES ($1, 5, 1, now() + interval '10 minutes', 'http_503: down')",
        f"queue:{queue}",
    )


async def test_push_health_and_reset(jobq: Client, db: asyncpg.Connection) -> None:
    # the blocking calls below are fine here: the service is a process of its own
    await _pushed_with_open_breaker(db, "pushed")
    health = jobq.get_push_health("pushed")
    assert isinstance(health, PushHealth) and health.queue == "pushed"
    assert health.target.url == "https://hooks.example.com/in"
    assert health.target.header_names == ["x-env"] and health.target.timeout_seconds == 7
    breaker = health.breaker
    assert (breaker.state, breaker.failures, breaker.last_error) == ("open", 5, "http_503: down")
    assert breaker.open_until is not None and breaker.open_until > datetime.now(UTC)
    reset = jobq.reset_push("pushed")
    assert (reset.breaker.state, reset.breaker.failures, reset.breaker.open_until) == (
        "closed",
        0,
        None,
    )
    assert jobq.get_push_health("pushed").breaker.state == "closed"
    with pytest.raises(NotFound):
        jobq.get_push_health("pulled")


async def test_the_async_client_reads_and_resets_push_health(
    service: Service, db: asyncpg.Connection
) -> None:
    await _pushed_with_open_breaker(db, "pushed")
    async with AsyncClient(service.url, retry=FAST_RETRY) as client:
        assert (await client.get_push_health("pushed")).breaker.state == "open"
        assert (await client.reset_push("pushed")).breaker.state == "closed"
        with pytest.raises(NotFound):
            await client.reset_push("pulled")
