"""Operators: what each queue holds, how fast it moves, and how the database copes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import StatsDep
from app.api.openapi import problems
from app.api.routes.jobs import QueuePath
from app.schemas_stats import QueuesStats, QueueStats

router = APIRouter(prefix="/v1", tags=["queues"])


@router.get(
    "/queues",
    operation_id="listQueues",
    response_model=QueuesStats,
    responses=problems(503),
)
async def list_queues(stats: StatsDep) -> dict[str, Any]:
    """Every queue's figures: jobs by state, the oldest due job's age, the last minute and
    hour's throughput, wait and run times, running jobs; and the database's health."""
    return await stats.queues()


@router.get(
    "/queues/{queue}",
    operation_id="getQueue",
    response_model=QueueStats,
    responses=problems(422, 503),
)
async def get_queue(queue: QueuePath, stats: StatsDep) -> dict[str, Any]:
    """One queue's figures (all zero for a queue no job names)."""
    return await stats.queue(queue)
