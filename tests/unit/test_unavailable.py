"""Which driver errors mean "the database is out of reach" (503), not a bug (500)."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from app.db.database import unavailable


class Error(Exception):
    """Stands for the DB-API adapter's wrapper class, which SQLAlchemy puts in `orig`."""


def _wrapped(cause: BaseException) -> DBAPIError:
    adapter = Error(str(cause))
    adapter.__cause__ = cause
    return DBAPIError("SELECT 1", {}, adapter)


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    "cause",
    [
        asyncpg.CannotConnectNowError("the database system is shutting down"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.TooManyConnectionsError("too many clients"),
        _chained(asyncpg.ConnectionDoesNotExistError("closed"), BrokenPipeError()),
        ConnectionRefusedError(111, "refused"),
    ],
)
def test_outages_are_recognised_however_deep(cause: BaseException) -> None:
    assert unavailable(_wrapped(cause))
    assert unavailable(cause)


@pytest.mark.parametrize(
    "cause",
    [
        asyncpg.UniqueViolationError("duplicate key"),
        asyncpg.UndefinedFunctionError("no such function"),
        ValueError("a bug"),
    ],
)
def test_statement_errors_are_not_outages(cause: BaseException) -> None:
    assert not unavailable(_wrapped(cause))
