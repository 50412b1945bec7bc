"""Push delivery: a pushed queue's due jobs are POSTed to its HTTP endpoint, signed,
instead of waiting for workers to lease them (docs/push.md).

Builds on the queue core (`app.jobs`: the dispatcher leases and finishes as a worker
does) and the delivery pieces (`app.delivery`); the queues' settings (`app.queues`) set
a queue's target. The rest of jobq uses this package through the names below.
"""

from app.push import routes
from app.push.repository import PushRepository
from app.push.schemas import PushTargetIn, PushTargetOut
from app.push.service import (
    DRAIN_SECONDS,
    Dispatcher,
    PushHealthService,
    PushTarget,
    PushTargets,
    TargetChange,
    breaker_key,
)
from app.push.views import target as target_view

__all__ = [
    "DRAIN_SECONDS",
    "Dispatcher",
    "PushHealthService",
    "PushRepository",
    "PushTarget",
    "PushTargetIn",
    "PushTargetOut",
    "PushTargets",
    "TargetChange",
    "breaker_key",
    "routes",
    "target_view",
]
