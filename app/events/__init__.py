"""Events: the job-event outbox (`jobq.job_events`, written by triggers in the
transaction of each job and queue change), the stamper that gives committed events
their commit order, their retention, the live stream `GET /v1/events`, and event
subscriptions (HTTP endpoints the events are delivered to, and their dispatcher). The rest of
jobq uses this package through the names below."""

from app.events.bell import EventBell
from app.events.dispatcher import Dispatcher
from app.events.pruner import EventsPruner
from app.events.repository import EventsRepository, SubscriptionsRepository
from app.events.routes import router
from app.events.service import EventStreams
from app.events.stamper import Stamper
from app.events.subscriptions import Subscriptions

__all__ = [
    "Dispatcher",
    "EventBell",
    "EventStreams",
    "EventsPruner",
    "EventsRepository",
    "Stamper",
    "Subscriptions",
    "SubscriptionsRepository",
    "router",
]
