"""Queues: their settings, the operator actions on a whole queue, their statistics.

Builds on the queue core (`app.jobs`); the rest of jobq uses this package through the
names below.
"""

from app.queues import routes
from app.queues.gauges import families as metric_families
from app.queues.repository import QueuesRepository
from app.queues.service import QueueServices

__all__ = ["QueueServices", "QueuesRepository", "metric_families", "routes"]
