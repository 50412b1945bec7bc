"""Events: the job-event outbox (`jobq.job_events`, written by triggers in the
transaction of each job and queue change), the stamper that gives committed events
their commit order, their retention, and the live stream `GET /v1/events`. The rest of
jobq uses this package through the names below."""

from app.events.bell import EventBell
from app.events.pruner import EventsPruner
from app.events.repository import EventsRepository
from app.events.routes import router
from app.events.service import EventStreams
from app.events.stamper import Stamper

__all__ = ["EventBell", "EventStreams", "EventsPruner", "EventsRepository", "Stamper", "router"]
