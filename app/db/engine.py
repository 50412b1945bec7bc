"""The connection pool, and where the database is."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic_core
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.core.config import Settings
from app.db import embedded
from app.db.url import async_url

POOL_OVERFLOW = 10
POOL_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
PREPARED_STATEMENT_CACHE_SIZE = 256
# asyncpg's own cache, of the statements the hot paths hand the driver as text (its
# default, 100, is less than the ~60 named statements and a lease from one queue for
# each batch size up to 100: a statement it drops is prepared again, and planned afresh
# for its next five runs).
STATEMENT_CACHE_SIZE = 256


def behind_pooler(settings: Settings) -> bool:
    """Does `database_url` lead to a transaction-mode pooler (a direct URL is set beside it)?"""
    return bool(settings.database_url and settings.database_direct_url)


def direct_url(settings: Settings, url: str) -> str:
    """Where sessions that outlive a transaction go (LISTEN, the migration lock): past
    the pooler when there is one, else `url` itself."""
    if behind_pooler(settings) and settings.database_direct_url:
        return settings.database_direct_url
    return url


def create_engine(url: str, pool_size: int, *, pooler: bool = False) -> AsyncEngine:
    """A pool whose connections run each statement in its own transaction.

    Every hot-path state change is one statement, so autocommit saves the BEGIN and
    COMMIT round trips; code that needs a real transaction opens one explicitly.

    `pooler`: the URL leads to PgBouncer in transaction mode, where one client
    connection's transactions may run on different server connections. A statement
    prepared by name on one is missing on the next, so nothing is cached: asyncpg then
    sends each statement unnamed, its Parse and Describe flushed (not synced) ahead of
    Bind and Execute, so the pooler keeps the server connection for the whole exchange.
    """
    caches: dict[str, Any] = {
        "prepared_statement_cache_size": PREPARED_STATEMENT_CACHE_SIZE,
        "statement_cache_size": STATEMENT_CACHE_SIZE,
    }
    if pooler:
        caches = {
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
        }
    engine = create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=POOL_OVERFLOW,
        pool_timeout=POOL_TIMEOUT_SECONDS,
        isolation_level="AUTOCOMMIT",
        # No rollback when a connection goes back: statements go to the driver, and
        # transactions are asyncpg's own (`Database.transaction`), ended by their block;
        # the adapter's rollback had nothing to roll back.
        pool_reset_on_return=None,
        connect_args={
            "timeout": CONNECT_TIMEOUT_SECONDS,
            **caches,
            # No plan_cache_mode override: the statements are written so that the
            # generic plan PostgreSQL may cache after five runs is the right one (see
            # finish_one in app/jobs/finish.sql); forcing a fresh plan per call slowed
            # every enqueue of the one-job path.
            "server_settings": {"application_name": "jobq"},
        },
    )
    event.listen(engine.sync_engine, "connect", _jsonb_as_text)
    return engine


def _jsonb_as_text(connection: Any, _record: object) -> None:
    """jsonb (payloads, results, histories: decoded on every row a lease or a read
    returns) in text form, each value handed straight to pydantic's parser (faster than
    `json`), and jsonb parameters (always JSON text here) sent as they are. The
    dialect's binary codec runs a Python function per value, which strips a version
    byte and decodes the bytes first: a lease decodes three a job. Set after the
    dialect's own, on every new connection, through the adapter's public `run_async`."""
    connection.run_async(
        lambda driver: driver.set_type_codec(
            "jsonb",
            schema="pg_catalog",
            format="text",
            encoder=str.__str__,  # JSON text as it is; anything else is refused
            decoder=pydantic_core.from_json,
        )
    )


async def resolve_database_url(settings: Settings) -> str:
    """`JOBQ_DATABASE_URL` if set, otherwise the embedded server's `jobq` database."""
    if settings.database_url:
        return settings.database_url
    server_url = await asyncio.to_thread(embedded.start, settings.data_dir)
    return await embedded.ensure_database(server_url, embedded.DEFAULT_DATABASE)
