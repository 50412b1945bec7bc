"""Fixtures of the tests that start processes: the service ones (the database ones are
tests/conftest.py's)."""

from tests.container_files import final, stages
from tests.fixtures.service import app, app_factory, client, client_factory, pruner, reaper

__all__ = [
    "app",
    "app_factory",
    "client",
    "client_factory",
    "final",
    "pruner",
    "reaper",
    "stages",
]
