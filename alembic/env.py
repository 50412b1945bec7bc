"""Alembic environment: jobq's schema lives in the `jobq` schema, migrated with plain SQL."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

SCHEMA = "jobq"
config = context.config


def run_with(connection: Connection) -> None:
    """Run the migrations on an open connection (the one `jobq migrate` holds the lock on)."""
    connection.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    connection.commit()  # so that alembic begins (and commits) a transaction per migration
    context.configure(
        connection=connection,
        version_table_schema=SCHEMA,
        transactional_ddl=True,
        # Each migration commits on its own: a value added to an enum can only be used
        # once the migration that added it has committed (PostgreSQL's rule).
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_standalone() -> None:
    """`alembic upgrade head` (or downgrade) typed by hand: the same lock and database as
    the service, and this command's own target. (Calling `upgrade` here would start a
    second Alembic command inside this one: it upgraded to head whatever was asked, and
    its end tore down this command's context, a traceback after every run.)"""
    from app.core.config import get_settings
    from app.db.engine import resolve_database_url
    from app.db.migrate import with_migration_lock

    if config.config_file_name is not None:
        fileConfig(config.config_file_name)

    async def run() -> None:
        await with_migration_lock(await resolve_database_url(get_settings()), run_with)

    asyncio.run(run())


if context.is_offline_mode():
    raise SystemExit("jobq migrations need a database connection; offline mode is not supported")

connection = config.attributes.get("connection")
if connection is None:
    run_standalone()
else:
    run_with(connection)
