"""What the commands that act on the database itself share (`serve`, `migrate`, `keys`):
logging set up as the service logs, and the database resolved the way it resolves it
(`JOBQ_DATABASE_URL`, else the embedded server), migrated first if asked."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import logging as jobq_logging
from app.core.config import get_settings
from app.db.engine import behind_pooler, create_engine, direct_url, resolve_database_url
from app.db.migrate import upgrade
from app.db.url import redacted

log = logging.getLogger("jobq")


def setup_logging() -> None:
    settings = get_settings()
    jobq_logging.configure(settings.log_format, settings.log_level)


async def database_url(*, migrate: bool) -> str:
    """The configured database's URL, its schema brought up to date if `migrate`."""
    settings = get_settings()
    url = await resolve_database_url(settings)
    log.info("database: %s", redacted(url))
    if migrate:
        await upgrade(direct_url(settings, url))  # its lock is a session's: past any pooler
        log.info("schema is up to date")
    return url


@asynccontextmanager
async def engine(*, migrate: bool) -> AsyncIterator[AsyncEngine]:
    """A one-connection pool on the configured database, disposed of afterwards."""
    pool = create_engine(
        await database_url(migrate=migrate), 1, pooler=behind_pooler(get_settings())
    )
    try:
        yield pool
    finally:
        await pool.dispose()
