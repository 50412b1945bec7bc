"""What the commands that act on the database itself share (`serve`, `migrate`, `keys`):
logging set up as the service logs, the database resolved the way it resolves it
(`JOBQ_DATABASE_URL`, else the embedded server), migrated first if asked, and a database
that cannot be reached reported in one line (`reported_connect_failure`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli._output import fail
from app.core import logging as jobq_logging
from app.core.config import get_settings
from app.db.database import Database, connect_failure
from app.db.engine import behind_pooler, create_engine, direct_url, resolve_database_url
from app.db.migrate import upgrade
from app.db.url import redacted

log = logging.getLogger("jobq")


def setup_logging() -> None:
    settings = get_settings()
    jobq_logging.configure(settings.log_format, settings.log_level)


@contextmanager
def reported_connect_failure() -> Iterator[None]:
    """Ends the command with one line, not a traceback, when the database refuses or
    cannot be reached: what failed, the driver's reason, and what to check."""
    try:
        yield
    except Exception as exc:
        reason = connect_failure(exc)
        if reason is None:
            raise
        configured = get_settings().database_url
        if configured is None:
            fail(f"cannot connect to the embedded PostgreSQL: {reason} (check JOBQ_DATA_DIR)")
        where = redacted(configured).replace("+asyncpg", "", 1)
        fail(
            f"cannot connect to the database {where}: {reason}"
            " (check JOBQ_DATABASE_URL, and that PostgreSQL runs there)"
        )


async def database_url(*, migrate: bool) -> str:
    """The configured database's URL, its schema brought up to date if `migrate`, else
    one connection opened to see that it answers."""
    settings = get_settings()
    url = await resolve_database_url(settings)
    if migrate:
        await upgrade(direct_url(settings, url))  # its lock is a session's: past any pooler
        log.info("database: %s; schema is up to date", redacted(url))
        return url
    pool = create_engine(url, 1, pooler=behind_pooler(settings))
    try:
        await Database(pool).ping()
    finally:
        await pool.dispose()
    log.info("database: %s", redacted(url))
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
