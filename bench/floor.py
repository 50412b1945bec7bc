"""The framework floor: the least a FastAPI service can do per call, served like jobq.

This app says what the HTTP stack allows: FastAPI on uvicorn (uvloop, httptools, the
same `--workers`), a pydantic body per request, one statement on a minimal table
(`bench_bare`) through a plain asyncpg pool, a small JSON answer. No keys, limits,
metrics, logs, lease tokens or history.

It answers the subset of jobq's API the drain and single-job generators use, in the
same shapes, so the very same generators drive it:

    GET  /healthz, /readyz
    POST /v1/queues/{queue}/jobs        insert one job                        201
    POST /v1/queues/{queue}/jobs/batch  insert many in one statement          201
    POST /v1/leases                     claim up to max_jobs (SKIP LOCKED),   200
                                        waiting up to wait_seconds for one
    POST /v1/leases/{lease_id}/complete mark one done                         200
    POST /v1/acks                       mark many done                        200

A single enqueue with `?notify=true` (the latency scenario's) notifies (`pg_notify`,
in its statement; the other scenarios' enqueues keep the plain insert, as this floor
always had) and a lease with `wait_seconds` waits for that, woken through one LISTEN
connection per process (one waiter per notification), as jobq's long-poll does. The
lease id is the job id.

Run: `uvicorn bench.floor:create_app --factory` with `JOBQ_BENCH_FLOOR_DSN` naming the
benchmark's database.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Annotated, Any

import asyncpg
from fastapi import FastAPI, Path, Request
from pydantic import BaseModel, Field

from bench.database import BARE_DUE_CHANNEL, BARE_INSERT_NOTIFY, BARE_SCHEMA

DSN_VARIABLE = "JOBQ_BENCH_FLOOR_DSN"
POOL_SIZE = 10

INSERT = "INSERT INTO bench_bare (payload) VALUES ($1::jsonb) RETURNING id"
INSERT_MANY = "INSERT INTO bench_bare (payload) SELECT unnest($1::jsonb[]) RETURNING id"
CLAIM = """
WITH claimed AS (
    SELECT id FROM bench_bare WHERE state = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE bench_bare b SET state = 1 FROM claimed WHERE b.id = claimed.id
RETURNING b.id, b.payload::text
"""
FINISH_ONE = "UPDATE bench_bare SET state = 2 WHERE id = $1 AND state = 1"
FINISH_MANY = "UPDATE bench_bare SET state = 2 WHERE id = ANY($1::bigint[]) AND state = 1"


class JobIn(BaseModel):
    type: str = Field(max_length=128)
    payload: dict[str, Any] = Field(default_factory=dict)


class JobsIn(BaseModel):
    jobs: list[JobIn] = Field(min_length=1, max_length=1000)


class LeaseIn(BaseModel):
    queues: list[str] = Field(min_length=1, max_length=100)
    max_jobs: int = Field(default=1, ge=1, le=1000)
    worker_id: str = Field(max_length=200)
    wait_seconds: float = Field(default=0, ge=0, le=60)


class AckIn(BaseModel):
    lease_id: str = Field(max_length=100)
    outcome: str
    result: Any = None


class AcksIn(BaseModel):
    acks: list[AckIn] = Field(max_length=1000)


async def _no_reset(conn: asyncpg.Connection) -> None:
    """A connection goes back to the pool as it is: its statements leave no session state
    (the LISTEN is on a connection of its own). asyncpg's default reset is a statement
    per release (`RESET ALL`, `UNLISTEN *`, ...): ~200 µs of CPU and a round trip a call,
    which jobq's pool does not pay either."""


def _pool(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.pool
    return pool


class Waiters:
    """Long-polling leases of this process; a notification wakes the one waiting longest."""

    def __init__(self) -> None:
        self.queue: collections.deque[asyncio.Future[None]] = collections.deque()

    def wake_one(self, *_: object) -> None:
        while self.queue:
            waiter = self.queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def claim(self, pool: asyncpg.Pool, max_jobs: int, wait: float) -> list[Any]:
        """Claim; when nothing is due, wait for a notification (registered before each
        claim, so none is missed) and claim again, until `wait` seconds have passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            woken: asyncio.Future[None] = loop.create_future()
            self.queue.append(woken)
            rows: list[Any] = []
            try:
                async with pool.acquire() as conn:
                    rows = await conn.fetch(CLAIM, max_jobs)
                left = deadline - loop.time()
                if rows or left <= 0:
                    return rows
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken, left)
            finally:
                with contextlib.suppress(ValueError):
                    self.queue.remove(woken)
                if rows and woken.done() and not woken.cancelled():
                    self.wake_one()  # woken while it claimed: the wake-up goes on


def create_app() -> FastAPI:
    """The floor app on the database `JOBQ_BENCH_FLOOR_DSN` names."""
    dsn = os.environ[DSN_VARIABLE]

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pool = await asyncpg.create_pool(
            dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, reset=_no_reset
        )
        async with app.state.pool.acquire() as conn:
            await conn.execute(BARE_SCHEMA)
        listener = await asyncpg.connect(dsn)
        await listener.add_listener(BARE_DUE_CHANNEL, waiters.wake_one)
        try:
            yield
        finally:
            await listener.close()
            await app.state.pool.close()

    waiters = Waiters()
    app = FastAPI(
        title="jobq benchmark floor",
        lifespan=lifespan,
        # as jobq serves unless JOBQ_OPENTELEMETRY: FastAPI's OpenTelemetry off
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )

    @app.get("/healthz")
    @app.get("/readyz")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/queues/{queue}/jobs", status_code=201)
    async def enqueue(
        queue: Annotated[str, Path(max_length=128)],
        job: JobIn,
        request: Request,
        notify: bool = False,
    ) -> dict[str, Any]:
        async with _pool(request).acquire() as conn:
            job_id = await conn.fetchval(
                BARE_INSERT_NOTIFY if notify else INSERT, json.dumps(job.payload)
            )
        return {"id": job_id, "queue": queue, "type": job.type, "state": "queued"}

    @app.post("/v1/queues/{queue}/jobs/batch", status_code=201)
    async def enqueue_many(
        queue: Annotated[str, Path(max_length=128)], body: JobsIn, request: Request
    ) -> dict[str, Any]:
        async with _pool(request).acquire() as conn:
            rows = await conn.fetch(INSERT_MANY, [json.dumps(job.payload) for job in body.jobs])
        return {
            "jobs": [
                {"id": job_id, "queue": queue, "type": job.type, "state": "queued"}
                for (job_id,), job in zip(rows, body.jobs, strict=True)
            ]
        }

    @app.post("/v1/leases")
    async def lease(body: LeaseIn, request: Request) -> dict[str, Any]:
        rows = await waiters.claim(_pool(request), body.max_jobs, body.wait_seconds)
        return {
            "leases": [
                {"lease_id": str(job_id), "job": {"id": job_id, "payload": json.loads(payload)}}
                for job_id, payload in rows
            ]
        }

    @app.post("/v1/leases/{lease_id}/complete")
    async def complete(lease_id: Annotated[int, Path(ge=1)], request: Request) -> dict[str, Any]:
        async with _pool(request).acquire() as conn:
            await conn.execute(FINISH_ONE, lease_id)
        return {"id": lease_id, "state": "succeeded"}

    @app.post("/v1/acks")
    async def acks(body: AcksIn, request: Request) -> dict[str, Any]:
        ids = [int(ack.lease_id) for ack in body.acks]
        async with _pool(request).acquire() as conn:
            await conn.execute(FINISH_MANY, ids)
        return {"results": [{"lease_id": str(i), "status": 200} for i in ids]}

    return app
