"""Operators: what each queue holds, how fast it moves, and how the database copes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from app.api.openapi import problems
from app.api.params import QueuePath
from app.keys import KeyedRoute, ReadCaller
from app.queues import views
from app.queues.routes.deps import services
from app.queues.schemas import FailedGroupsOut, QueueDetail, QueueSeriesOut, QueuesStats

MAX_SERIES_MINUTES = 30 * 1440  # the rollups' default retention

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["queues"])


@router.get(
    "/queues",
    operation_id="listQueues",
    response_model=QueuesStats,
    responses=problems(401, 403, 503),
)
async def list_queues(caller: ReadCaller, request: Request) -> dict[str, Any]:
    """Every queue's figures: jobs by state, the oldest due job's age, the last minute and
    hour's throughput, wait and run times, running jobs; and the database's health.

    A key limited to some queues sees only theirs.
    """
    queues = services(request)
    return views.queues(await queues.stats.queues(), visible=caller.may_use)


@router.get(
    "/queues/{queue}",
    operation_id="getQueue",
    response_model=QueueDetail,
    responses=problems(401, 403, 422, 503),
)
async def get_queue(caller: ReadCaller, queue: QueuePath, request: Request) -> dict[str, Any]:
    """One queue's figures (all zero for a queue no job names: `known` is then false),
    the types of its due jobs that no worker leased lately, and a pushed queue's
    deliveries."""
    queues = services(request)
    caller.require_queues([queue])
    report = await queues.stats.queue(queue)
    return views.queue_detail(report, await queues.push_health.deliveries(queue))


@router.get(
    "/queues/{queue}/failed/groups",
    operation_id="listFailedGroups",
    response_model=FailedGroupsOut,
    responses=problems(401, 403, 422, 503),
)
async def failed_groups(caller: ReadCaller, queue: QueuePath, request: Request) -> dict[str, Any]:
    """The queue's failed jobs grouped by type and error type, biggest first (at most 50),
    with the latest failure's message: what to redrive (`POST .../failed/retry`)."""
    queues = services(request)
    caller.require_queues([queue])
    rows = await queues.stats.failed_groups(queue)
    return {"queue": queue, "groups": [row._asdict() for row in rows]}


@router.get(
    "/queues/{queue}/series",
    operation_id="getQueueSeries",
    response_model=QueueSeriesOut,
    responses=problems(401, 403, 422, 503),
)
async def queue_series(
    caller: ReadCaller,
    queue: QueuePath,
    request: Request,
    minutes: Annotated[int, Query(ge=1, le=MAX_SERIES_MINUTES)] = 60,
) -> dict[str, Any]:
    """The queue's last `minutes` minutes (up to 30 days), step by step: jobs enqueued,
    succeeded and failed (from the per-minute rollups, which outlive the jobs)."""
    queues = services(request)
    caller.require_queues([queue])
    step, rows = await queues.stats.series(queue, minutes)
    return {"queue": queue, "step_minutes": step, "minutes": [row._asdict() for row in rows]}
