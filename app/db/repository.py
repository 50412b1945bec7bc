"""Runs the named SQL in `queries` and hands back plain rows. Knows no rules.

Driver errors are translated here, once: a database that cannot be reached becomes
`DatabaseUnavailable`, which the API answers with 503.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import DatabaseUnavailable
from app.db import queries
from app.db.statement import Statement

Row: TypeAlias = asyncpg.Record

MAINTENANCE_LOCK_KEY = 0x6A6F_6271_0002  # "jobq" + 2: held by the replica reaping or pruning


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a failed attempt waits before the next: base * 2^(attempt-1), capped, ±jitter."""

    base_seconds: float
    cap_seconds: float
    jitter: float

    def params(self) -> dict[str, float]:
        return {
            "backoff_base": self.base_seconds,
            "backoff_cap": self.cap_seconds,
            "backoff_jitter": self.jitter,
        }


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


@dataclass(frozen=True, slots=True)
class LeaderBatch:
    """Rows a maintenance statement changed, and when (database clock, epoch seconds) the
    lock was held: from when it was taken until after the statement, before commit."""

    rows: Sequence[Row]
    started: float
    ended: float


def _unavailable(exc: BaseException) -> bool:
    """Is this error the database being out of reach, rather than a bad statement?"""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return any(
        isinstance(e, PoolTimeout | OSError | asyncio.TimeoutError | InterfaceError)
        or type(e).__name__ in _UNAVAILABLE_ERRORS
        for e in _causes(exc)
    )


class JobsRepository:
    """The jobs table, one method per named statement."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, as the asyncpg connection under SQLAlchemy's adapter.

        A connection that broke under a statement is invalidated (the pool opens a new
        one); an unreachable database becomes `DatabaseUnavailable`.
        """
        try:
            async with self._engine.connect() as conn:
                pooled = await conn.get_raw_connection()
                driver = pooled.driver_connection
                assert isinstance(driver, asyncpg.Connection)
                try:
                    yield driver
                except Exception as exc:
                    if driver.is_closed() or _unavailable(exc):
                        await conn.invalidate(exc)
                        raise DatabaseUnavailable() from exc
                    raise
        except DatabaseUnavailable:
            raise
        except Exception as exc:
            if _unavailable(exc):
                raise DatabaseUnavailable() from exc
            raise

    async def _all(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        async with self._driver() as conn:
            return await conn.fetch(statement.sql, *statement.args(params))

    async def ping(self) -> None:
        await self._all(queries.PING, {})

    async def enqueue_one(self, params: dict[str, Any]) -> Row | None:
        rows = await self._all(queries.ENQUEUE_ONE, params)
        return rows[0] if rows else None

    async def enqueue_many(self, queue: str, columns: dict[str, list[Any]]) -> list[Row]:
        return await self._all(queries.ENQUEUE_MANY, {"queue": queue, **columns})

    async def lease(
        self,
        queues: list[str],
        types: list[str],
        max_jobs: int,
        lease_seconds: int | None,
        worker_id: str,
        key_id: int | None = None,
    ) -> list[Row]:
        return await self._all(
            queries.LEASE,
            {
                "queues": queues,
                "types": types,
                "max_jobs": max_jobs,
                "lease_seconds": lease_seconds,
                "worker_id": worker_id,
                "key_id": key_id,
            },
        )

    async def heartbeat(self, params: dict[str, Any]) -> Row | None:
        rows = await self._all(queries.HEARTBEAT, {"key_id": None, **params})
        return rows[0] if rows else None

    async def finish(
        self, columns: dict[str, list[Any]], backoff: Backoff, key_id: int | None = None
    ) -> list[Row]:
        """The jobs finished, in brief (`ord` is the ack's 1-based place in `columns`)."""
        return await self._all(queries.FINISH, {**columns, **backoff.params(), "key_id": key_id})

    async def finish_one(
        self, params: dict[str, Any], backoff: Backoff, key_id: int | None = None
    ) -> Row | None:
        """The whole job, finished; None when the lease matched no live lease of this key."""
        return await self._one(queries.FINISH_ONE, {**params, **backoff.params(), "key_id": key_id})

    async def get(self, job_id: int) -> Row | None:
        rows = await self._all(queries.GET_JOB, {"job_id": job_id})
        return rows[0] if rows else None

    async def get_many(self, job_ids: list[int]) -> list[Row]:
        return await self._all(queries.GET_JOBS, {"job_ids": job_ids})

    async def list(
        self,
        *,
        queue: str | None,
        state: str | None,
        type_: str | None,
        after: int,
        limit: int,
        allowed: tuple[list[str], list[str]] | None = None,
    ) -> list[Row]:
        """`allowed`: (queue names, LIKE patterns) to limit the page to; None: every queue."""
        names, patterns = allowed if allowed is not None else (None, None)
        return await self._all(
            queries.LIST_JOBS,
            {
                "queue": queue,
                "state": state,
                "type": type_,
                "after": after,
                "limit": limit,
                "allowed_names": names,
                "allowed_patterns": patterns,
            },
        )

    async def _as_leader(self, statement: Statement, params: dict[str, Any]) -> LeaderBatch | None:
        """Run `statement` holding the maintenance lock; None when another replica holds it."""
        async with self._driver() as conn, conn.transaction():
            lock = await conn.fetchrow(queries.TRY_MAINTENANCE_LOCK.sql, MAINTENANCE_LOCK_KEY)
            assert lock is not None
            leader, started = lock
            if not leader:
                return None
            rows = await conn.fetch(statement.sql, *statement.args(params))
            ended = await conn.fetchval(queries.CLOCK.sql)
            return LeaderBatch(rows, float(started), float(ended))

    async def reap_batch(self, batch_size: int, backoff: Backoff) -> LeaderBatch | None:
        """One batch of expired leases; None when another replica is maintaining."""
        return await self._as_leader(
            queries.REAP_EXPIRED, {"batch_size": batch_size, **backoff.params()}
        )

    async def prune_batch(
        self, batch_size: int, succeeded_age: float | None, failed_age: float | None
    ) -> LeaderBatch | None:
        """One batch of finished jobs past retention; None when another replica is maintaining."""
        return await self._as_leader(
            queries.PRUNE_FINISHED,
            {"batch_size": batch_size, "succeeded_age": succeeded_age, "failed_age": failed_age},
        )

    # ---- API keys (jobq.api_keys) -----------------------------------------------------

    async def create_key(
        self,
        *,
        name: str,
        lookup_id: str,
        secret_hash: bytes,
        scopes: Sequence[str],
        queues: Sequence[str] | None,
    ) -> Row | None:
        """The new key's row; None when the name or the lookup id is taken."""
        rows = await self._all(
            queries.CREATE_KEY,
            {
                "name": name,
                "lookup_id": lookup_id,
                "secret_hash": secret_hash,
                "scopes": scopes,
                "queues": queues,
            },
        )
        return rows[0] if rows else None

    async def revoke_key(self, name: str) -> Row | None:
        rows = await self._all(queries.REVOKE_KEY, {"name": name})
        return rows[0] if rows else None

    async def get_key(self, lookup_id: str) -> Row | None:
        rows = await self._all(queries.GET_KEY, {"lookup_id": lookup_id})
        return rows[0] if rows else None

    async def get_key_by_name(self, name: str) -> Row | None:
        rows = await self._all(queries.GET_KEY_BY_NAME, {"name": name})
        return rows[0] if rows else None

    async def list_keys(self) -> Sequence[Row]:
        return await self._all(queries.LIST_KEYS, {})

    async def any_key(self) -> bool:
        rows = await self._all(queries.ANY_KEY, {})
        return bool(rows[0][0])

    async def touch_key(self, key_id: int) -> None:
        await self._all(queries.TOUCH_KEY, {"key_id": key_id})

    # ---- admin actions -------------------------------------------------------------

    async def _one(self, statement: Statement, params: dict[str, Any]) -> Row | None:
        rows = await self._all(statement, params)
        return rows[0] if rows else None

    async def cancel(self, job_id: int) -> Row | None:
        """The job, cancelled or flagged; None when it is neither queued nor running."""
        return await self._one(queries.CANCEL_JOB, {"job_id": job_id})

    async def retry(
        self, job_id: int, *, reset_attempts: bool, run_at: datetime | None
    ) -> Row | None:
        """The job, queued again; None when it is neither failed nor cancelled."""
        return await self._one(
            queries.RETRY_JOB,
            {"job_id": job_id, "reset_attempts": reset_attempts, "run_at": run_at},
        )

    async def redrive(
        self,
        queue: str,
        *,
        type_: str | None,
        error_type: str | None,
        failed_since: datetime | None,
        limit: int,
        reset_attempts: bool,
    ) -> int:
        """How many failed jobs of `queue` went back to the queue."""
        row = await self._one(
            queries.REDRIVE_FAILED,
            {
                "queue": queue,
                "type": type_,
                "error_type": error_type,
                "failed_since": failed_since,
                "limit": limit,
                "reset_attempts": reset_attempts,
            },
        )
        assert row is not None
        return int(row["retried"])

    async def pause_queue(self, queue: str) -> Row:
        row = await self._one(queries.PAUSE_QUEUE, {"queue": queue})
        assert row is not None
        return row

    async def resume_queue(self, queue: str) -> Row:
        row = await self._one(queries.RESUME_QUEUE, {"queue": queue})
        assert row is not None
        return row

    async def purge_queued(
        self, queue: str, *, batch_size: int, up_to: int | None
    ) -> tuple[int, int | None]:
        """(jobs deleted, the highest id a later batch may delete)."""
        row = await self._one(
            queries.PURGE_QUEUED, {"queue": queue, "batch_size": batch_size, "up_to": up_to}
        )
        assert row is not None
        return int(row["deleted"]), row["up_to"]

    async def delete(self, job_id: int) -> bool:
        """Whether the job was deleted (it existed and was not running)."""
        return await self._one(queries.DELETE_JOB, {"job_id": job_id}) is not None

    # ---- queue statistics ---------------------------------------------------------------

    async def queue_overview(self) -> Sequence[Row]:
        return await self._all(queries.QUEUE_OVERVIEW, {"queue": None})

    async def queue_stats(self, queue: str | None) -> Sequence[Row]:
        return await self._all(queries.QUEUE_STATS, {"queue": queue})

    async def running_jobs(self, queue: str | None, per_queue: int) -> Sequence[Row]:
        return await self._all(queries.RUNNING_JOBS, {"queue": queue, "per_queue": per_queue})

    async def database_health(self) -> Row:
        (row,) = await self._all(queries.DATABASE_HEALTH, {})
        return row

    # ---- queue settings ------------------------------------------------------------

    async def get_queue_settings(self, queue: str) -> Row | None:
        rows = await self._all(queries.GET_QUEUE_SETTINGS, {"queue": queue})
        return rows[0] if rows else None

    async def set_queue_max_backlog(self, queue: str, max_backlog: int | None) -> Row:
        (row,) = await self._all(
            queries.SET_QUEUE_MAX_BACKLOG, {"queue": queue, "max_backlog": max_backlog}
        )
        return row
