"""The queue core's services, as the `Annotated` dependency its routes declare."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from app.jobs.service import JobServices


# Async on purpose: FastAPI runs plain `def` dependencies in a thread pool, a hop that
# cost 12 % of a request's CPU on the single-job path.
async def _jobs(request: Request) -> JobServices:
    return cast(JobServices, request.app.state.jobs)


JobsDep = Annotated[JobServices, Depends(_jobs)]
