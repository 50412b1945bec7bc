"""The database fixtures every level but `unit/` uses: a real PostgreSQL, never a mock.

With `JOBQ_DATABASE_URL` set the tests use that server; without it, the embedded
server in `JOBQ_DATA_DIR` (default `.jobq/`). Either way they work in a database of
their own, `jobq_test_<pid>`, created fresh and migrated with Alembic once per run,
emptied before each test, and dropped at the end. The service's settings reach it
directly or through PgBouncer (tests/fixtures/pgbouncer.py, a plugin of every level).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import pytest

from app.core.config import Settings
from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import with_database

pytest_plugins = ["tests.fixtures.pgbouncer"]

TEST_DATABASE = f"jobq_test_{os.getpid()}"  # concurrent runs never share one
# Set by .ci/run on each of its two runs of the suite (one a database mode, side by side):
# which run this is. A test marked `once("server")` or `once("embedded")` checks nothing
# a database mode changes, and runs in that one of the two only.
ONCE_IN = "JOBQ_TESTS_ONCE_IN"
RUNS = ("server", "embedded")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `JOBQ_TESTS_ONCE_IN=<run>`, leave out the tests marked `once` for the other
    run (reported as deselected). Without it, every test runs."""
    run = os.environ.get(ONCE_IN)
    if run is None:
        return
    if run not in RUNS:
        raise pytest.UsageError(f"{ONCE_IN} must be server or embedded, not {run!r}")
    kept: list[pytest.Item] = []
    elsewhere: list[pytest.Item] = []
    for item in items:
        (kept if _once_in(item) in (None, run) else elsewhere).append(item)
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = kept


def _once_in(item: pytest.Item) -> str | None:
    """The run a test marked `once` belongs to; None for a test of both."""
    marker = item.get_closest_marker("once")
    if marker is None:
        return None
    (run,) = marker.args
    if run not in RUNS:
        raise pytest.UsageError(f"{item.nodeid}: once({run!r}): server or embedded")
    return str(run)


def plain(url: str) -> str:
    """An asyncpg-style URL (no SQLAlchemy driver name)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _recreate(server_url: str, database: str) -> str:
    conn = await asyncpg.connect(plain(with_database(server_url, "postgres")))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(database)} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {quote_ident(database)}")
    finally:
        await conn.close()
    url = with_database(server_url, database)
    await upgrade(url)
    return url


@pytest.fixture(scope="session")
def server_url() -> str:
    """The PostgreSQL server under test: `JOBQ_DATABASE_URL`, or the embedded one."""
    configured = os.environ.get("JOBQ_DATABASE_URL")
    if configured:
        return configured
    return embedded.start(Settings().data_dir)


async def _drop(server_url: str, database: str) -> None:
    conn = await asyncpg.connect(plain(with_database(server_url, "postgres")))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(database)} WITH (FORCE)")
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A freshly migrated database of the tests' own, dropped at the end."""
    yield asyncio.run(_recreate(server_url, TEST_DATABASE))
    asyncio.run(_drop(server_url, TEST_DATABASE))


# Emptied before each test: the tables that hold rows, or whose ids moved (their owned
# sequences used), in one TRUNCATE. Not all of them each time: a TRUNCATE gives each table
# new files, 10 ms a test for the seven, most of them empty (4 ms for jobs alone).
EMPTY_TABLES = """
DO $$
DECLARE
    tables text[] := ARRAY['jobq.jobs', 'jobq.queues', 'jobq.job_dependencies',
                           'jobq.schedules', 'jobq.maintenance_runs', 'jobq.queue_rate_log',
                           'jobq.schedule_runs', 'jobq.queue_types',
                           'jobq.delivery_breakers', 'jobq.job_counts',
                           'jobq.job_stat_deltas', 'jobq.queue_minutes',
                           'jobq.queue_recent', 'jobq.fair_keys',
                           'jobq.fair_key_rate_log', 'jobq.push_targets',
                           'jobq.job_events', 'jobq.event_subscriptions',
                           'jobq.audit_log', 'jobq.workers',
                           'jobq.push_minutes'];
    used text[] := ARRAY(
        SELECT d.refobjid::regclass::text
          FROM pg_sequences s
          JOIN pg_depend d
            ON d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
           AND d.objid = format('%I.%I', s.schemaname, s.sequencename)::regclass
         WHERE s.schemaname = 'jobq' AND s.last_value IS NOT NULL);
    stale text[] := '{}';
    name text;
    found boolean;
BEGIN
    FOREACH name IN ARRAY tables LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM %s)', name) INTO found;
        IF found OR name = ANY(used) THEN
            stale := stale || name;
        END IF;
    END LOOP;
    IF cardinality(stale) > 0 THEN
        EXECUTE format('TRUNCATE %s RESTART IDENTITY', array_to_string(stale, ', '));
    END IF;
END $$
"""


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A direct connection to the test database, its jobs and queue settings emptied first."""
    conn = await asyncpg.connect(plain(database_url))
    await conn.execute(EMPTY_TABLES)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def no_keys(db: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """No API key before and after the test: the other tests rely on open mode."""
    await db.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")
    yield db
    await db.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")


@pytest.fixture
def make_settings(service_urls: dict[str, str]) -> Callable[..., Settings]:
    """Settings for the test database (directly or through PgBouncer: `connection`), with
    any field overridden."""

    def make(**overrides: Any) -> Settings:
        return Settings(**(service_urls | overrides))

    return make
