"""The queue core's services, as its routes reach them: `services(request)`.

Not a FastAPI dependency: each dependency level costs a request a solve of its own,
while FastAPI hands any route its `Request` for free.
"""

from __future__ import annotations

from typing import cast

from fastapi import Request

from app.jobs.service import JobServices


def services(request: Request) -> JobServices:
    """The queue core's services, built by the app's lifespan."""
    return cast(JobServices, request.app.state.jobs)
