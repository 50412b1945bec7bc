"""The queues' services, as their routes reach them: `services(request)`.

Not a FastAPI dependency, for the reason given in `app.jobs.routes.deps`.
"""

from __future__ import annotations

from typing import cast

from fastapi import Request

from app.queues.service import QueueServices


def services(request: Request) -> QueueServices:
    """The queues' services, built by the app's lifespan."""
    return cast(QueueServices, request.app.state.queues)
