"""Push delivery: a pushed queue's due jobs are POSTed to its HTTP endpoint, signed,
instead of waiting for workers to lease them (docs/push.md).

Builds on the queue core (`app.jobs`: the dispatcher leases and finishes as a worker
does) and the delivery pieces (`app.delivery`); the queues' settings (`app.queues`) set
a queue's target. The rest of jobq uses this package through the names below.
"""

from app.push import routes
from app.push.repository import PushRepository
from app.push.schemas import PushDeliveriesOut, PushTargetIn, PushTargetOut
from app.push.service import (
    DRAIN_SECONDS,
    Dispatcher,
    PushDeliveries,
    PushHealthService,
    PushTarget,
    PushTargets,
    TargetChange,
    breaker_key,
)
from app.push.views import deliveries as deliveries_view
from app.push.views import target as target_view

__all__ = [
    "DRAIN_SECONDS",
    "Dispatcher",
    "PushDeliveries",
    "PushDeliveriesOut",
    "PushHealthService",
    "PushRepository",
    "PushTarget",
    "PushTargetIn",
    "PushTargetOut",
    "PushTargets",
    "TargetChange",
    "breaker_key",
    "deliveries_view",
    "routes",
    "target_view",
]
