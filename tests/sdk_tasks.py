"""Workers that the SDK tests run as `jobq worker tests.sdk_tasks:NAME` processes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jobq_client import Job, Worker

# Drains within its grace period: jobs of a few seconds, 20 s to finish them.
worker = Worker(queues=["drain"], concurrency=3, wait_seconds=5, grace_seconds=20)

# Gives running jobs half a second, then releases them.
impatient = Worker(queues=["release"], concurrency=2, wait_seconds=5, grace_seconds=0.5)


@worker.handler("nap")
async def nap(job: Job) -> dict[str, Any]:
    await asyncio.sleep(job.payload["seconds"])
    return {"slept": job.payload["seconds"], "attempt": job.attempt}


@impatient.handler("nap")
def long_nap(job: Job) -> dict[str, Any]:
    time.sleep(job.payload["seconds"])  # a plain function: runs in a thread of its own
    return {"slept": job.payload["seconds"]}


@impatient.handler("async-nap")
async def long_async_nap(job: Job) -> dict[str, Any]:
    await asyncio.sleep(job.payload["seconds"])
    return {"slept": job.payload["seconds"]}
