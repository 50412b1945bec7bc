"""The service as a whole: liveness, readiness, metrics."""

from app.health.routes import metrics_router, router

__all__ = ["metrics_router", "router"]
