"""Bring the schema to the newest Alembic revision, one process at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db.url import async_url

MIGRATION_LOCK_KEY = 0x6A6F_6271_0001  # "jobq" + 1: held while migrating
ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"


def alembic_config() -> Config:
    """Alembic's configuration, independent of the working directory."""
    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    return config


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade(url: str, revision: str = "head") -> None:
    """Apply pending migrations under an advisory lock, so replicas starting together are safe."""
    await with_migration_lock(url, lambda connection: _upgrade(connection, revision))


async def with_migration_lock(url: str, work: Callable[[Connection], None]) -> None:
    """Run `work` on a connection that holds the migration lock (replicas wait their turn)."""
    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            # A session lock: it outlives the transactions below, one per migration (a new
            # enum value is usable only once the migration that added it committed).
            await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            await conn.commit()
            await conn.run_sync(work)
            await conn.commit()
    finally:
        await engine.dispose()
