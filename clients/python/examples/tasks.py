"""An example worker for the `images` queue.

Run it against a jobq service (from this folder, clients/python):

    JOBQ_URL=http://127.0.0.1:8000 python -m jobq_client worker examples.tasks:worker
    # or, where jobq itself is installed:  jobq worker examples.tasks:worker

then enqueue a job:

    curl -X POST http://127.0.0.1:8000/v1/queues/images/jobs \\
      -H 'Content-Type: application/json' \\
      -d '{"type": "resize", "payload": {"width": 1920, "height": 1080, "max_side": 640}}'
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from jobq_client import Job, JobCancelled, Permanent, Worker

worker = Worker(queues=["images"], concurrency=4)
STAGES = ("download", "resize", "upload")


@worker.handler("resize")
async def resize(job: Job) -> dict[str, Any]:
    """Scale an image's size down to `max_side`, reporting each stage."""
    try:
        width, height = int(job.payload["width"]), int(job.payload["height"])
        max_side = int(job.payload.get("max_side", 640))
    except (KeyError, TypeError, ValueError) as exc:
        raise Permanent(f"bad payload: {exc!r}") from exc  # retrying cannot help
    for done, stage in enumerate(STAGES):
        if job.cancel_requested:
            raise JobCancelled()
        await job.progress(100 * done / len(STAGES), stage=stage)
        await asyncio.sleep(0.2)  # the real work would go here
    scale = min(1.0, max_side / max(width, height, 1))
    return {"width": round(width * scale), "height": round(height * scale)}


@worker.handler("checksum")
def checksum(job: Job) -> dict[str, str]:
    """A plain function: it runs in a thread, so blocking work is fine here."""
    job.progress_sync(50, stage="hash")
    data = json.dumps(job.payload, sort_keys=True).encode()
    return {"sha256": hashlib.sha256(data).hexdigest()}


if __name__ == "__main__":
    worker.run()
