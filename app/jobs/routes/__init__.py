"""The queue core's HTTP routes, one router per audience: producers and readers, workers,
operators."""

from app.jobs.routes.operators import router as operators
from app.jobs.routes.producers import router as producers
from app.jobs.routes.workers import router as workers

__all__ = ["operators", "producers", "workers"]
