"""The queue core's services, as its routes reach them: `services(request)`.

Not a FastAPI dependency: each dependency level costs a request a solve of its own
(docs/performance/service.md), while FastAPI hands any route its `Request` for free.
"""

from __future__ import annotations

from fastapi import Request

from app.jobs.service import JobServices


def services(request: Request) -> JobServices:
    """The queue core's services: the `jobs` of the app's `Services` (`app.services`),
    which its lifespan built and keeps on `app.state`."""
    jobs: JobServices = request.app.state.services.jobs
    return jobs
