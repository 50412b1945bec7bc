"""Operators: a queue's settings (its maximum backlog)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from app.api.auth import ADMIN
from app.api.deps import QueueSettingsDep, ReadCaller
from app.api.openapi import problems
from app.api.routes.jobs import QueuePath
from app.schemas import QueueSettingsIn, QueueSettingsOut

router = APIRouter(prefix="/v1", tags=["queues"])


@router.get(
    "/queues/{queue}/settings",
    operation_id="getQueueSettings",
    response_model=QueueSettingsOut,
    responses=problems(401, 403, 422),
)
async def get_queue_settings(
    caller: ReadCaller, queue: QueuePath, settings: QueueSettingsDep
) -> dict[str, Any]:
    """Get a queue's settings; a queue nobody configured has the defaults."""
    caller.require_queues([queue])
    current = await settings.get(queue)
    return {"queue": current.queue, "max_backlog": current.max_backlog}


@router.put(
    "/queues/{queue}/settings",
    operation_id="setQueueSettings",
    response_model=QueueSettingsOut,
    dependencies=[Depends(ADMIN)],
    responses=problems(400, 401, 403, 413, 422),
)
async def set_queue_settings(
    queue: QueuePath, request: QueueSettingsIn, settings: QueueSettingsDep
) -> dict[str, Any]:
    """Set a queue's maximum backlog (`null`: none); applies to the next enqueue."""
    current = await settings.set_max_backlog(queue, request.max_backlog)
    return {"queue": current.queue, "max_backlog": current.max_backlog}
