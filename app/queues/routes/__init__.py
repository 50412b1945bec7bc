"""The queues' HTTP routes: operator actions, settings, statistics."""

from app.queues.routes.operators import router as operators
from app.queues.routes.settings import router as settings
from app.queues.routes.stats import router as stats

__all__ = ["operators", "settings", "stats"]
