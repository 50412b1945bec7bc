"""The connection pool, and where the database is."""

from __future__ import annotations

import asyncio

import pydantic_core
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.core.config import Settings
from app.db import embedded
from app.db.url import async_url

POOL_OVERFLOW = 10
POOL_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
PREPARED_STATEMENT_CACHE_SIZE = 256


def create_engine(url: str, pool_size: int) -> AsyncEngine:
    """A pool whose connections run each statement in its own transaction.

    Every hot-path state change is one statement, so autocommit saves the BEGIN and
    COMMIT round trips; code that needs a real transaction opens one explicitly.
    """
    return create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=POOL_OVERFLOW,
        pool_timeout=POOL_TIMEOUT_SECONDS,
        isolation_level="AUTOCOMMIT",
        # jsonb columns (payloads, results, histories) are decoded on every row a lease
        # or a read returns: pydantic's Rust parser does it 5-10x faster than `json`.
        json_deserializer=pydantic_core.from_json,
        connect_args={
            "timeout": CONNECT_TIMEOUT_SECONDS,
            "prepared_statement_cache_size": PREPARED_STATEMENT_CACHE_SIZE,
            # No plan_cache_mode override: the statements are written so that the
            # generic plan PostgreSQL may cache after five runs is the right one (see
            # FINISH in queries.py); forcing a fresh plan per call cost the one-job
            # path ~0.4 ms per enqueue.
            "server_settings": {"application_name": "jobq"},
        },
    )


async def resolve_database_url(settings: Settings) -> str:
    """`JOBQ_DATABASE_URL` if set, otherwise the embedded server's `jobq` database."""
    if settings.database_url:
        return settings.database_url
    server_url = await asyncio.to_thread(embedded.start, settings.data_dir)
    return await embedded.ensure_database(server_url, embedded.DEFAULT_DATABASE)
