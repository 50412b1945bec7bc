"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.auth import PROBE, PUBLIC
from app.api.deps import JobsDep, ReaperDep
from app.api.openapi import problems
from app.core.errors import ReaperStalled
from app.schemas import Health

router = APIRouter(tags=["health"])


@router.get(
    "/healthz", operation_id="checkHealth", response_model=Health, dependencies=[Depends(PUBLIC)]
)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="checkReadiness",
    response_model=Health,
    responses=problems(401, 503),
    dependencies=[Depends(PROBE)],
)
async def readyz(jobs: JobsDep, reaper: ReaperDep) -> dict[str, str]:
    """The database answers and the reaper is keeping up: send traffic here.

    Open to peers on loopback; others need an API key (any scope).
    """
    await jobs.ping()
    if reaper is not None and not reaper.on_time:
        raise ReaperStalled("no reaper pass finished in the last 3 intervals")
    return {"status": "ok"}
