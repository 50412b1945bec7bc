"""A failed handler's traceback starts at the handler: the SDK's frames that called it
(and the thread machinery that ran a plain function) are left out."""

from __future__ import annotations

import pytest

from jobq_client import Job, Worker
from jobq_client.testing import run

worker = Worker(queues=["q"])


def _parse(text: str) -> int:
    return int(text)


@worker.handler("async_broken")
async def async_broken(job: Job) -> int:
    return _parse(job.payload)


@worker.handler("sync_broken")
def sync_broken(job: Job) -> int:
    return _parse(job.payload)


@pytest.mark.parametrize("job_type", ["async_broken", "sync_broken"])
def test_the_traceback_starts_at_the_handler(job_type: str) -> None:
    outcome = run(worker, job_type, "not a number")
    assert outcome.error is not None
    lines = outcome.error.details["traceback"].splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].startswith(f'  File "{__file__}"') and lines[1].endswith(f"in {job_type}")
    assert "jobq_client" not in "\n".join(lines), "\n".join(lines)
    assert any(line.endswith("in _parse") for line in lines)
    assert lines[-1] == "ValueError: invalid literal for int() with base 10: 'not a number'"
