"""Operators: what each queue holds, how fast it moves, and how the database copes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.openapi import problems
from app.api.params import QueuePath
from app.keys import ReadCaller
from app.queues import views
from app.queues.routes.deps import QueuesDep
from app.queues.schemas import QueuesStats, QueueStats

router = APIRouter(prefix="/v1", tags=["queues"])


@router.get(
    "/queues",
    operation_id="listQueues",
    response_model=QueuesStats,
    responses=problems(401, 403, 503),
)
async def list_queues(caller: ReadCaller, queues: QueuesDep) -> dict[str, Any]:
    """Every queue's figures: jobs by state, the oldest due job's age, the last minute and
    hour's throughput, wait and run times, running jobs; and the database's health.

    A key limited to some queues sees only theirs.
    """
    return views.queues(await queues.stats.queues(), visible=caller.may_use)


@router.get(
    "/queues/{queue}",
    operation_id="getQueue",
    response_model=QueueStats,
    responses=problems(401, 403, 422, 503),
)
async def get_queue(caller: ReadCaller, queue: QueuePath, queues: QueuesDep) -> dict[str, Any]:
    """One queue's figures (all zero for a queue no job names)."""
    caller.require_queues([queue])
    return views.queue(await queues.stats.queue(queue))
