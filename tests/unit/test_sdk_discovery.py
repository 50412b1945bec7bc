"""The SDK finds the service as the `jobq` command does (one rule: `JOBQ_URL`, else
`http://JOBQ_HOST:JOBQ_PORT`), and a worker names the URL it calls when it starts and
when the service does not answer."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.core.config import Settings
from jobq_client import AsyncClient, Client, Job, RetryPolicy, Worker
from tests.helpers import free_port

ENVIRONMENTS = [
    {},
    {"JOBQ_PORT": "18810"},
    {"JOBQ_HOST": "0.0.0.0", "JOBQ_PORT": "18811"},
    {"JOBQ_HOST": "::"},
    {"JOBQ_HOST": "::1", "JOBQ_PORT": "9000"},
    {"JOBQ_HOST": "jobq.internal"},
    {"JOBQ_URL": "http://jobq.internal:80", "JOBQ_PORT": "18810"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_sdk_and_the_cli_find_the_same_service(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("JOBQ_URL", "JOBQ_HOST", "JOBQ_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with Client() as client:
        assert client.base_url == Settings().service_url()


async def test_a_worker_names_the_url_it_starts_on_and_cannot_reach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    retry = RetryPolicy(max_retries=0)
    async with AsyncClient(url, retry=retry) as client:
        worker = Worker(client, queues=["q"], wait_seconds=1)

        @worker.handler("t")
        async def handle(job: Job) -> None:
            return None

        with caplog.at_level(logging.INFO, logger="jobq_client"):
            task = asyncio.create_task(worker.run_async())
            while not any("trying again" in r.getMessage() for r in caplog.records):
                assert not task.done(), "the worker stopped"
                await asyncio.sleep(0.05)
            worker.stop()
            await asyncio.wait_for(task, timeout=10)
    started = next(r.getMessage() for r in caplog.records if "serving" in r.getMessage())
    assert f"from {url}" in started
    again = next(r.getMessage() for r in caplog.records if "trying again" in r.getMessage())
    assert url in again and "connection_failed" in again
