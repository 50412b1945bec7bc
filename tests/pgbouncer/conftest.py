"""The API tests of `tests/api`, run again with jobq behind a real PgBouncer in
transaction pooling mode: `JOBQ_DATABASE_URL` leads to PgBouncer and
`JOBQ_DATABASE_DIRECT_URL` to PostgreSQL itself (LISTEN). Each module here imports one
module of `tests/api` whole; the fixtures below put the service behind the pooler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.core.config import Settings
from tests.api.auth_support import service_factory
from tests.fixtures.pgbouncer import pgbouncer_url
from tests.fixtures.service import app, app_factory, client, client_factory, pruner, reaper

__all__ = [
    "app",
    "app_factory",
    "client",
    "client_factory",
    "make_settings",
    "pgbouncer_url",
    "pruner",
    "reaper",
    "service_factory",
]


@pytest.fixture
def make_settings(database_url: str, pgbouncer_url: str) -> Callable[..., Settings]:
    """Settings for the test database through PgBouncer, with any field overridden."""

    def make(**overrides: Any) -> Settings:
        fields: dict[str, Any] = {
            "database_url": pgbouncer_url,
            "database_direct_url": database_url,
        }
        return Settings(**(fields | overrides))

    return make
