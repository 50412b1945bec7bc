"""The workers' JSON shapes: the listing, a presence ping, a quiet or resume."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import Header
from pydantic import BaseModel, Field

from app.api.types import Name, Strict
from app.core.fields import MAX_TEXT_LENGTH

DEFAULT_WORKERS_PAGE = 100
MAX_WORKERS_PAGE = 500
MAX_SERVED = 100  # queues, and types, a worker may say it serves

# The headers a worker sends with its calls (lease, heartbeat, finishing, presence), and
# the one a quiet worker's lease and presence answers carry.
SDK_HEADER = "Jobq-Worker-Sdk"
HOST_HEADER = "Jobq-Worker-Host"
QUIET_HEADER = "Jobq-Worker-Quiet"
MAX_LABEL_LENGTH = 200  # an SDK's name and version, or a host, as sent

# The worker headers as route parameters (FastAPI reads `jobq_worker_sdk` from
# `Jobq-Worker-Sdk`).
WorkerHeader = Annotated[
    str | None,
    Header(
        max_length=MAX_TEXT_LENGTH,
        description="The id of the worker calling (its lease calls' `worker_id`): counts "
        "this call as its sign of life, a finish in its throughput.",
    ),
]
SdkHeader = Annotated[
    str | None,
    Header(
        max_length=MAX_LABEL_LENGTH,
        description="The worker's SDK and its version, as `name/version`.",
    ),
]
HostHeader = Annotated[
    str | None, Header(max_length=MAX_LABEL_LENGTH, description="The worker's host.")
]


class WorkerOut(BaseModel):
    """A worker seen lately, or holding running jobs."""

    worker_id: str
    status: Literal["live", "gone"] = Field(
        description="`gone`: not seen for `JOBQ_WORKER_GONE_SECONDS` (listed until "
        "`JOBQ_WORKER_RETAIN_SECONDS`)."
    )
    sdk: str | None = Field(description=f"Its SDK's name, from the `{SDK_HEADER}` header.")
    version: str | None = Field(description="Its SDK's version.")
    host: str | None = Field(description=f"Its host, from the `{HOST_HEADER}` header.")
    queues: list[str] = Field(description="The queues it leases from.")
    types: list[str] = Field(description="The job types it leases (`[]`: any).")
    first_seen: datetime | None
    last_seen: datetime | None = Field(
        description="Its latest call (lease, heartbeat, finish or presence ping), to within "
        "`JOBQ_WORKER_FLUSH_SECONDS`."
    )
    running: int = Field(description="Jobs it holds now.")
    job_ids: list[int] = Field(description="The first 20 of its jobs, by id.")
    next_expiry: datetime | None = Field(description="When its first lease ends, unless renewed.")
    leased: int = Field(description="Jobs it leased since first seen.")
    finished: int = Field(description="Jobs it completed or failed since first seen.")
    finished_per_minute: float = Field(
        description="Jobs it finished a minute, over its last full minute window."
    )
    quiet: bool = Field(description="Asked to lease no more (`POST /v1/workers/{id}/quiet`).")
    quiet_at: datetime | None
    quieted_by: str | None = Field(description="The name of the key that quieted it.")


class WorkersOut(BaseModel):
    """A page of workers by id; pass `next_after` as `after` for the next page."""

    workers: list[WorkerOut]
    next_after: str | None


class PresenceIn(Strict):
    """What an idle worker serves (its lease calls say it too)."""

    queues: list[Name] | None = Field(
        default=None, max_length=MAX_SERVED, description="Default: as last said. Its queues."
    )
    types: list[Name] | None = Field(
        default=None,
        max_length=MAX_SERVED,
        description="Default: as last said. The job types it leases (`[]`: any).",
    )


class PresenceOut(BaseModel):
    """Whether the worker may lease."""

    worker_id: str
    quiet: bool = Field(description="True: lease no more (finish the jobs held).")


class QuietOut(BaseModel):
    """A worker's quiet state."""

    worker_id: str
    quiet: bool
    quiet_at: datetime | None
    quieted_by: str | None
