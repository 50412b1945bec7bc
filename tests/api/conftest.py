"""Fixtures of the tests over HTTP, in process: the service ones (the database ones are
tests/conftest.py's)."""

from tests.api.auth_support import service_factory
from tests.fixtures.service import app, app_factory, client, client_factory, pruner, reaper

__all__ = [
    "app",
    "app_factory",
    "client",
    "client_factory",
    "pruner",
    "reaper",
    "service_factory",
]
