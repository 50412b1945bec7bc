"""The pool as the repositories use it: named statements in, asyncpg records out.

Driver errors are translated here, once: a database that cannot be reached becomes
`DatabaseUnavailable`, which the API answers with 503. Repositories build typed rows
from the records; nothing above them reads a record.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util.concurrency import await_only

from app.core.errors import DatabaseUnavailable
from app.db import greenlets
from app.db.statement import Statement

# asyncpg's names for "the server went away, is starting, is stopping, or is full".
_UNAVAILABLE_ERRORS = frozenset(
    {
        "CannotConnectNowError",
        "ConnectionDoesNotExistError",
        "AdminShutdownError",
        "CrashShutdownError",
        "ConnectionFailureError",
        "TooManyConnectionsError",
        # asyncpg's protocol state broken by a server that went away mid-statement
        "InternalClientError",
    }
)


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps: SQLAlchemy's error, its DB-API adapter's, asyncpg's, the OS's."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        wrapped = getattr(current, "orig", None)
        current = wrapped if isinstance(wrapped, BaseException) else current.__cause__
    return chain


def unavailable(exc: BaseException) -> bool:
    """Is this error the database being out of reach, rather than a bad statement?"""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return any(
        isinstance(e, PoolTimeout | OSError | asyncio.TimeoutError | InterfaceError)
        or type(e).__name__ in _UNAVAILABLE_ERRORS
        for e in _causes(exc)
    )


# SQLSTATE classes and codes of a connection the server refused before any statement:
# connection exceptions, bad credentials, no such database, starting up, full.
_REFUSED_SQLSTATE_CLASSES = ("08", "28", "3D")
_REFUSED_SQLSTATES = frozenset({"57P03", "53300"})


def connect_failure(exc: BaseException) -> str | None:
    """Why a connection could not be opened, in the driver's or the OS's own words (`Connect
    call failed ('127.0.0.1', 5439)`, `database "x" does not exist`); None when `exc` is
    not a failure to connect."""
    for cause in reversed(_causes(exc)):  # the innermost cause says it best
        sqlstate = getattr(cause, "sqlstate", None)
        refused = isinstance(sqlstate, str) and (
            sqlstate.startswith(_REFUSED_SQLSTATE_CLASSES) or sqlstate in _REFUSED_SQLSTATES
        )
        if refused or isinstance(cause, OSError | asyncio.TimeoutError):
            return str(cause).strip() or type(cause).__name__
    return None


def _broke(driver: asyncpg.Connection, exc: BaseException) -> bool:
    """Did `exc`, raised under a statement, leave the connection unusable (closed, or the
    database out of reach)? Such a connection is invalidated, not given back."""
    return driver.is_closed() or unavailable(exc)


class Database:
    """Runs named statements on pooled connections."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, as the asyncpg connection under SQLAlchemy's adapter.

        Taken from the pool itself, not through an `AsyncConnection`: that wrapper cost
        ~90 µs of CPU per call (a third greenlet switch, a task to close it, its own
        objects), and every statement here goes to the driver anyway. A connection that
        broke under a statement is invalidated (the pool opens a new one); an unreachable
        database becomes `DatabaseUnavailable`.
        """
        pooled, driver = await greenlets.run(self._checkout)
        try:
            yield driver
        except Exception as exc:
            if _broke(driver, exc):
                await greenlets.run(pooled.invalidate, exc)
                raise DatabaseUnavailable() from exc
            raise
        finally:
            # Given back at once: the reset (a rollback of the adapter's transaction,
            # never begun: statements go to the driver) does no I/O. Should a return
            # ever wait and be cancelled there, SQLAlchemy's pool takes the connection
            # back as failed and opens a new one.
            await greenlets.run(pooled.close)

    def _checkout(self) -> tuple[PoolProxiedConnection, asyncpg.Connection]:
        """In a greenlet: a pooled connection and the asyncpg connection under it; an
        unreachable database raises `DatabaseUnavailable`."""
        try:
            pooled = self.engine.sync_engine.raw_connection()
        except Exception as exc:
            if unavailable(exc):
                raise DatabaseUnavailable() from exc
            raise
        driver = pooled.driver_connection
        assert isinstance(driver, asyncpg.Connection)
        return pooled, driver

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection inside a transaction, committed when the block ends."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[asyncpg.Record]:
        """Every row `statement` returns.

        The checkout, the statement and the return run in one greenlet, one kept for
        the next call (`greenlets.run`): SQLAlchemy's async pool runs each checkout and
        each return in a new greenlet of its own, which maps a fresh 16 KiB Python stack
        that its end unmaps again (`mmap`, a page fault, `munmap`: the kernel's work,
        which no instruction count shows).
        """
        return await greenlets.run(self._fetch, statement.sql, statement.args(params))

    def _fetch(self, sql: str, args: list[Any]) -> list[asyncpg.Record]:
        """`fetch`'s body, in its greenlet: what `connection` does around a statement."""
        pooled, driver = self._checkout()
        try:
            rows: list[asyncpg.Record] = await_only(driver.fetch(sql, *args))
            return rows
        except Exception as exc:
            if _broke(driver, exc):
                pooled.invalidate(exc)
                raise DatabaseUnavailable() from exc
            raise
        finally:
            pooled.close()

    async def ping(self) -> None:
        """Raise `DatabaseUnavailable` unless the database answers."""
        async with self.connection() as conn:
            await conn.execute("SELECT 1")

    async def fetch_one(
        self, statement: Statement, params: dict[str, Any]
    ) -> asyncpg.Record | None:
        """The first row `statement` returns, if any."""
        rows = await self.fetch(statement, params)
        return rows[0] if rows else None


async def fetch_in(
    conn: asyncpg.Connection, statement: Statement, params: dict[str, Any]
) -> list[asyncpg.Record]:
    """Every row `statement` returns, on a connection a repository already holds."""
    return await conn.fetch(statement.sql, *statement.args(params))
