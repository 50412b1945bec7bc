"""The queues' services, as their routes reach them: `services(request)`.

Not a FastAPI dependency, for the reason given in `app.jobs.routes.deps`.
"""

from __future__ import annotations

from fastapi import Request

from app.queues.service import QueueServices


def services(request: Request) -> QueueServices:
    """The queues' services: the `queues` of the app's `Services` (`app.services`)."""
    queues: QueueServices = request.app.state.services.queues
    return queues
