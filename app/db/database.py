"""The pool as the repositories use it: named statements in, asyncpg records out.

Driver errors are translated here, once: a database that cannot be reached becomes
`DatabaseUnavailable`, which the API answers with 503. Repositories build typed rows
from the records; nothing above them reads a record.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection, QueuePool

from app.core.errors import DatabaseUnavailable
from app.db.statement import P, Statement

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


_OPENED = "jobq_opened"  # a pool entry's `info` key: when its connection was opened


def _stamp_opened(_driver: object, record: ConnectionPoolEntry) -> None:
    """A pool `connect` hook: note when the connection was opened."""
    record.info[_OPENED] = time.monotonic()


class Database:
    """Runs named statements on pooled connections."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # When a connection broke because the database went away, the idle ones opened
        # before are as dead: each is replaced at its next checkout, as SQLAlchemy's own
        # disconnect handling does, through the pool's documented events.
        self._broken_at = 0.0
        event.listen(engine.sync_engine, "connect", _stamp_opened)
        event.listen(engine.sync_engine, "checkout", self._refuse_stale)

    def _refuse_stale(self, _driver: object, record: ConnectionPoolEntry, _proxy: object) -> None:
        """A pool `checkout` hook: a connection opened before the last disconnect is
        replaced (the pool reconnects on `DisconnectionError`)."""
        if record.info.get(_OPENED, 0.0) < self._broken_at:
            raise DisconnectionError("opened before the database went away")

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, as the asyncpg connection under SQLAlchemy's adapter
        (`AsyncEngine.raw_connection()`, its `driver_connection`): every statement goes
        to the driver. A connection that broke under a statement is invalidated (the
        pool opens a new one); an unreachable database becomes `DatabaseUnavailable`.
        """
        try:
            pooled = await self.engine.raw_connection()
        except Exception as exc:
            if unavailable(exc):
                raise DatabaseUnavailable() from exc
            raise
        try:
            driver = pooled.driver_connection
            assert isinstance(driver, asyncpg.Connection)
            try:
                yield driver
            except Exception as exc:
                if _broke(driver, exc):
                    self._broken_at = time.monotonic()
                    await self._in_adapter(functools.partial(pooled.invalidate, exc))
                    raise DatabaseUnavailable() from exc
                raise
        finally:
            await self._give_back(pooled)

    async def _give_back(self, pooled: PoolProxiedConnection) -> None:
        """Return `pooled` to the pool. With a free place in the pool's queue (nearly
        always) that is a plain call, which does no I/O: the pool's reset on return is
        off (statements go to the driver, transactions are asyncpg's own, ended by their
        block), so nothing waits, not even on a cancellation. An overflow connection
        the pool closes instead is closed where SQLAlchemy's adapter can wait."""
        pool = self.engine.pool
        if isinstance(pool, QueuePool) and pool.checkedin() < pool.size():
            pooled.close()
        else:
            await self._in_adapter(pooled.close)

    async def _in_adapter(self, call: Callable[[], object]) -> None:
        """Run `call` (a pool operation that may close a driver connection) where
        SQLAlchemy's async adapter may wait on the driver: `AsyncSession.run_sync`,
        which takes no connection of its own for it."""
        async with AsyncSession(self.engine) as session:
            await session.run_sync(lambda _session: call())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection inside a transaction, committed when the block ends."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    async def fetch(self, statement: Statement[P], params: P) -> list[asyncpg.Record]:
        """Every row `statement` returns, run with `params`."""
        async with self.connection() as conn:
            return await conn.fetch(statement.sql, *statement.args(params))

    async def ping(self) -> None:
        """Raise `DatabaseUnavailable` unless the database answers."""
        async with self.connection() as conn:
            await conn.execute("SELECT 1")

    async def fetch_one(self, statement: Statement[P], params: P) -> asyncpg.Record | None:
        """The first row `statement` returns, if any."""
        rows = await self.fetch(statement, params)
        return rows[0] if rows else None


async def fetch_in(
    conn: asyncpg.Connection, statement: Statement[P], params: P
) -> list[asyncpg.Record]:
    """Every row `statement` returns, on a connection a repository already holds."""
    return await conn.fetch(statement.sql, *statement.args(params))
