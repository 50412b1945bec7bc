"""FastAPI dependencies, as `Annotated` aliases the routes declare."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from app.api.auth import ADMIN, ENQUEUE, READ, WORK
from app.service.auth import Authenticator, Caller
from app.service.jobs import JobService
from app.service.queue_settings import QueueSettingsService
from app.service.reaper import Reaper
from app.service.stats import StatsService


async def get_jobs(request: Request) -> JobService:
    return cast(JobService, request.app.state.jobs)


async def get_reaper(request: Request) -> Reaper | None:
    """The reaper, when this process runs one in the background."""
    return cast(Reaper | None, request.app.state.background_reaper)


# Async on purpose: FastAPI runs plain `def` dependencies in a thread pool, a hop that
# cost 12 % of a request's CPU on the single-job path.
JobsDep = Annotated[JobService, Depends(get_jobs)]
ReaperDep = Annotated[Reaper | None, Depends(get_reaper)]


async def get_auth(request: Request) -> Authenticator:
    return cast(Authenticator, request.app.state.auth)


AuthDep = Annotated[Authenticator, Depends(get_auth)]

# The caller of a route that needs a key with this scope (see app/api/auth.py).
EnqueueCaller = Annotated[Caller, Depends(ENQUEUE)]
WorkCaller = Annotated[Caller, Depends(WORK)]
ReadCaller = Annotated[Caller, Depends(READ)]
AdminCaller = Annotated[Caller, Depends(ADMIN)]


async def get_stats(request: Request) -> StatsService:
    return cast(StatsService, request.app.state.stats)


StatsDep = Annotated[StatsService, Depends(get_stats)]


async def get_queue_settings(request: Request) -> QueueSettingsService:
    return cast(QueueSettingsService, request.app.state.queue_settings)


QueueSettingsDep = Annotated[QueueSettingsService, Depends(get_queue_settings)]
