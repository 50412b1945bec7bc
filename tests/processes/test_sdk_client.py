"""The Python SDK's clients against a real `jobq serve`: typed results, typed errors,
retries that are safe (the idempotency key is reused), the public names pinned.

Answers the open-mode service cannot give (401, 403, 503, a lost answer) come from a
real HTTP proxy in front of it that the test scripts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from jobq_client import (
    AsyncClient,
    Client,
    Complete,
    ConnectionFailed,
    DatabaseUnavailable,
    ErrorInfo,
    Fail,
    Forbidden,
    JobNotFound,
    JobqError,
    JobSpec,
    LeaseLost,
    LeaseNotFound,
    QueueFull,
    RetryPolicy,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from tests.helpers import free_port
from tests.sdk_support import Proxy, Respond, Service, problem, running_service

# The SDK's logic against a service, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")

FAST_RETRY = RetryPolicy(max_retries=3, backoff_seconds=0.05, max_backoff_seconds=0.2)


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from running_service(database_url, tmp_path_factory.mktemp("sdk") / "serve.log")


@pytest.fixture
def jobq(service: Service, db: asyncpg.Connection) -> Iterator[Client]:
    """A client of the (emptied) service."""
    with Client(service.url, retry=FAST_RETRY) as client:
        yield client


@pytest.fixture
def proxy(service: Service) -> Iterator[Proxy]:
    front = Proxy(service.url)
    yield front
    front.close()


def _keys(proxy: Proxy) -> list[str]:
    return [json.loads(seen.body)["idempotency_key"] for seen in proxy.seen]


def test_a_job_through_its_life_with_typed_results(jobq: Client) -> None:
    created = jobq.enqueue("mail", "send", {"to": "ada"}, priority=5, idempotency_key="k-1")
    assert created.job is not None
    assert (created.deduplicated, created.job.state, created.job.priority) == (False, "queued", 5)
    again = jobq.enqueue("mail", "send", {"to": "someone else"}, idempotency_key="k-1")
    assert again.job is not None
    assert (again.id, again.deduplicated, again.job.payload) == (created.id, True, {"to": "ada"})

    (lease,) = jobq.lease(["mail"], worker_id="w-1", max_jobs=5)
    assert (lease.job.id, lease.job.state, lease.job.attempt) == (created.id, "running", 1)
    beat = jobq.heartbeat(lease.lease_id, percent=40, stage="render")
    assert beat.cancel_requested is False and beat.expires_at > lease.expires_at
    progress = jobq.get_job(created.id).progress
    assert progress is not None and (progress.percent, progress.stage) == (40, "render")

    done = jobq.complete(lease.lease_id, {"id": "m-1"})
    assert (done.state, done.result, done.attempts[0].outcome) == (
        "succeeded",
        {"id": "m-1"},
        "succeeded",
    )
    assert done.attempts[0].worker_id == "w-1" and done.finished_at is not None


def test_batch_enqueue_acks_and_paging(jobq: Client) -> None:
    items = jobq.enqueue_many("batch", [JobSpec("t", i) for i in range(5)])
    assert [item.state for item in items] == ["queued"] * 5
    assert len({item.id for item in items}) == 5
    leases = jobq.lease(["batch"], worker_id="w", max_jobs=3)
    results = jobq.ack(
        [
            Complete(leases[0].lease_id, "ok"),
            Fail(leases[1].lease_id, "Boom", "no", retryable=False),
        ]
    )
    assert [(r.status, r.state) for r in results] == [(200, "succeeded"), (200, "failed")]
    again = jobq.ack([Complete(leases[1].lease_id)])  # the other outcome: refused
    assert (again[0].status, again[0].code, again[0].ok) == (409, "lease_lost", False)

    page = jobq.list_jobs(queue="batch", limit=2)
    assert [j.id for j in page.jobs] == [items[0].id, items[1].id] and page.next_after == items[
        1
    ].id
    assert [j.id for j in jobq.iter_jobs(queue="batch", page_size=2)] == [i.id for i in items]
    assert [j.id for j in jobq.iter_jobs(queue="batch", state="failed")] == [items[1].id]
    failed = jobq.get_job(items[1].id)
    assert failed.last_error == ErrorInfo("Boom", "no", None)


def test_errors_are_typed_from_the_problem_code(jobq: Client) -> None:
    with pytest.raises(JobNotFound) as missing:
        jobq.get_job(987654)
    assert (missing.value.status, missing.value.code) == (404, "job_not_found")
    assert "987654" in missing.value.detail or missing.value.detail

    with pytest.raises(LeaseNotFound):
        jobq.heartbeat("1-" + "0" * 32)

    job = jobq.enqueue("errs", "t")
    (lease,) = jobq.lease(["errs"], worker_id="w")
    jobq.fail(lease.lease_id, "Oops", retryable=False)
    with pytest.raises(LeaseLost) as lost:
        jobq.complete(lease.lease_id)
    assert (lost.value.status, lost.value.job_id, lost.value.state) == (409, job.id, "failed")
    assert isinstance(lost.value, JobqError)

    with pytest.raises(ValidationError) as invalid:
        jobq.enqueue("errs", "t", priority=10**6)
    assert invalid.value.status == 422
    assert [e["loc"] for e in invalid.value.errors] == [["body", "priority"]]


def test_auth_and_queue_full_answers_are_typed_and_not_retried(proxy: Proxy) -> None:
    with Client(proxy.url, api_key="secret-key", retry=FAST_RETRY) as client:
        proxy.plan = [Respond(401, problem(401, "unauthorized"))]
        with pytest.raises(Unauthorized) as unauthorized:
            client.get_job(1)
        assert unauthorized.value.status == 401
        proxy.plan = [Respond(403, problem(403, "forbidden"))]
        with pytest.raises(Forbidden):
            client.list_jobs()
        proxy.plan = [Respond(429, problem(429, "queue_full"))]
        with pytest.raises(QueueFull) as full:
            client.enqueue("q", "t")
        assert full.value.status == 429
    assert len(proxy.seen) == 3, "4xx answers must not be retried"
    assert {seen.headers["authorization"] for seen in proxy.seen} == {"Bearer secret-key"}


def test_a_lost_enqueue_answer_is_retried_with_the_same_key(
    proxy: Proxy, jobq: Client, db: asyncpg.Connection
) -> None:
    # The first try commits, but its answer is a 503; the retry finds that job.
    proxy.plan = [Respond(503, problem(503, "database_unavailable"), forward_first=True)]
    with Client(proxy.url, retry=FAST_RETRY) as client:
        created = client.enqueue("retry", "t", {"n": 1})
    assert created.deduplicated is True, "the retry should have found the committed job"
    keys = _keys(proxy)
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 32
    assert created.job is not None and created.job.idempotency_key == keys[0]
    assert [j.id for j in jobq.iter_jobs(queue="retry")] == [created.id]

    # A batch: every job has its own generated key, kept across the retry.
    proxy.seen.clear()
    proxy.plan = [Respond(503, problem(503, "database_unavailable"), forward_first=True)]
    with Client(proxy.url, retry=FAST_RETRY) as client:
        items = client.enqueue_many("retry-batch", [JobSpec("t", 1), JobSpec("t", 2)])
    assert [item.deduplicated for item in items] == [True, True]
    first, second = (json.loads(seen.body)["jobs"] for seen in proxy.seen)
    assert [j["idempotency_key"] for j in first] == [j["idempotency_key"] for j in second]
    assert len({j["idempotency_key"] for j in first}) == 2
    assert len(list(jobq.iter_jobs(queue="retry-batch"))) == 2


async def test_async_client_retries_503_then_gives_up_typed(proxy: Proxy, jobq: Client) -> None:
    unavailable = Respond(503, problem(503, "database_unavailable"), headers={"Retry-After": "0"})
    proxy.plan = [unavailable, unavailable]
    async with AsyncClient(proxy.url, retry=FAST_RETRY) as client:
        created = await client.enqueue("a", "t")
        assert created.deduplicated is False  # the 503s never reached the service
        assert (await client.get_job(created.id)).state == "queued"
        proxy.plan = [unavailable] * 4
        proxy.seen.clear()
        with pytest.raises(DatabaseUnavailable) as gave_up:
            await client.get_job(created.id)
    assert isinstance(gave_up.value, Unavailable) and gave_up.value.status == 503
    assert len(proxy.seen) == 4, "one try and max_retries=3 retries"


def test_connection_errors_are_retried_until_the_service_answers(service: Service) -> None:
    port = free_port()
    started: list[Proxy] = []

    def listen_later() -> None:
        time.sleep(0.4)
        started.append(Proxy(service.url, port=port))

    late = threading.Thread(target=listen_later)
    late.start()
    try:
        patient = RetryPolicy(max_retries=8, backoff_seconds=0.1, max_backoff_seconds=0.3)
        with Client(f"http://127.0.0.1:{port}", retry=patient) as client:
            created = client.enqueue("late", "t")
        late.join()
        assert created.deduplicated is False
        assert len(started[0].seen) == 1
    finally:
        late.join()
        for proxy in started:
            proxy.close()


def test_nothing_listening_raises_connection_failed_after_the_retries() -> None:
    port = free_port()
    policy = RetryPolicy(max_retries=2, backoff_seconds=0.1, max_backoff_seconds=0.1)
    started = time.monotonic()
    with (
        Client(f"http://127.0.0.1:{port}", retry=policy) as client,
        pytest.raises(ConnectionFailed) as failed,
    ):
        client.get_job(1)
    assert time.monotonic() - started >= 0.1, "two retries, each waiting at least 0.05 s"
    assert isinstance(failed.value.__cause__, httpx.ConnectError)
    assert failed.value.status is None and failed.value.code == "connection_failed"
    assert f"http://127.0.0.1:{port}" in str(failed.value)  # where it called


def test_client_reads_url_and_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JOBQ_URL", "http://example.invalid:1234/")
    monkeypatch.setenv("JOBQ_API_KEY", "from-env")
    with Client() as client:
        assert (client.base_url, client.api_key) == ("http://example.invalid:1234", "from-env")
    with Client("http://other:1", api_key="given") as client:
        assert (client.base_url, client.api_key) == ("http://other:1", "given")
