"""Cron schedules: create or replace, read, pause, resume, delete (`admin` to change,
`read` to see)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from app.api.openapi import problems
from app.api.types import StorableText
from app.core.names import MAX_NAME_LENGTH, NAME_PATTERN
from app.keys import AdminCaller, KeyedRoute, ReadCaller
from app.schedules import views
from app.schedules.schemas import (
    DEFAULT_SCHEDULES_PAGE,
    MAX_SCHEDULES_PAGE,
    ScheduleIn,
    ScheduleOut,
    SchedulesOut,
)
from app.schedules.service import Definition, Schedules

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["schedules"])

ScheduleName = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The schedule's name.")
]


def _schedules(request: Request) -> Schedules:
    """The schedules' service: the `schedules` of the app's `Services` (`app.services`;
    not a FastAPI dependency: see `app.jobs.routes.deps`)."""
    schedules: Schedules = request.app.state.services.schedules
    return schedules


@router.put(
    "/schedules/{name}",
    operation_id="setSchedule",
    status_code=200,
    response_model=ScheduleOut,
    responses={
        201: {"model": ScheduleOut, "description": "The schedule was created."},
        **problems(400, 401, 403, 413, 422),
    },
)
async def set_schedule(
    caller: AdminCaller,
    name: ScheduleName,
    schedule: ScheduleIn,
    request: Request,
    response: Response,
) -> dict[str, Any]:
    """Create or replace a schedule: its next tick is the first after now."""
    schedules = _schedules(request)
    del caller
    found, created = await schedules.put(name, Definition(**dict(schedule)))
    response.status_code = 201 if created else 200
    return views.schedule(found)


@router.get(
    "/schedules",
    operation_id="listSchedules",
    response_model=SchedulesOut,
    responses=problems(401, 403, 422),
)
async def list_schedules(
    caller: ReadCaller,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_SCHEDULES_PAGE)] = DEFAULT_SCHEDULES_PAGE,
    after: Annotated[
        StorableText, Query(max_length=MAX_NAME_LENGTH, description="The last name seen.")
    ] = "",
) -> dict[str, Any]:
    """Schedules by name with their next ticks and last runs, a page at a time (a key
    limited to queues sees theirs)."""
    schedules = _schedules(request)
    allowed = caller.queues.sql() if caller.queues is not None else None
    found = await schedules.page(after, limit, allowed)
    return views.page(found, limit)


@router.get(
    "/schedules/{name}",
    operation_id="getSchedule",
    response_model=ScheduleOut,
    responses=problems(401, 403, 404, 422),
)
async def get_schedule(caller: ReadCaller, name: ScheduleName, request: Request) -> dict[str, Any]:
    """One schedule: its next ticks, and the last jobs it made."""
    schedules = _schedules(request)
    found = await schedules.get(name)
    caller.require_queue_of(found.row.queue, "schedule")
    return views.schedule(found)


@router.delete(
    "/schedules/{name}",
    operation_id="deleteSchedule",
    status_code=204,
    response_class=Response,
    responses=problems(401, 403, 404, 422),
)
async def delete_schedule(_caller: AdminCaller, name: ScheduleName, request: Request) -> Response:
    """Delete a schedule (the jobs it made stay)."""
    schedules = _schedules(request)
    await schedules.delete(name)
    return Response(status_code=204)


@router.post(
    "/schedules/{name}/pause",
    operation_id="pauseSchedule",
    response_model=ScheduleOut,
    responses=problems(401, 403, 404, 422),
)
async def pause_schedule(
    _caller: AdminCaller, name: ScheduleName, request: Request
) -> dict[str, Any]:
    """Stop making jobs from a schedule."""
    schedules = _schedules(request)
    return views.schedule(await schedules.pause(name, True))


@router.post(
    "/schedules/{name}/resume",
    operation_id="resumeSchedule",
    response_model=ScheduleOut,
    responses=problems(401, 403, 404, 422),
)
async def resume_schedule(
    _caller: AdminCaller, name: ScheduleName, request: Request
) -> dict[str, Any]:
    """Make jobs from a schedule again, from its next tick after now."""
    schedules = _schedules(request)
    return views.schedule(await schedules.pause(name, False))
