"""The rules of push delivery: the targets (`targets`) and the dispatcher that delivers
to them (`dispatcher`). Knows nothing of HTTP routes."""

from app.push.service.dispatcher import DRAIN_SECONDS, Dispatcher
from app.push.service.health import PushDeliveries, PushHealth, PushHealthService
from app.push.service.targets import PushTarget, PushTargets, TargetChange, breaker_key

__all__ = [
    "DRAIN_SECONDS",
    "Dispatcher",
    "PushDeliveries",
    "PushHealth",
    "PushHealthService",
    "PushTarget",
    "PushTargets",
    "TargetChange",
    "breaker_key",
]
