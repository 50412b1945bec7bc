"""alembic/schema.sql is the schema that migrating an empty database gives, on the server
under test (tests/schema_dump.py): a migration added or changed without `make schema`,
or the file edited by hand, fails here."""

from __future__ import annotations

import pytest

from tests.schema_dump import SCHEMA_FILE, migrated_schema, normalised, stale_message


async def test_migrating_an_empty_database_gives_the_schema_file(server_url: str) -> None:
    fresh = await migrated_schema(server_url)
    assert "CREATE TABLE jobq.jobs (" in fresh
    committed = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    if fresh != committed:
        pytest.fail(stale_message(committed, fresh), pytrace=False)


def _dump(server: str, key: str, column_options: str, view: str) -> str:
    """A dump as pg_dump 18 writes it, in parts."""
    return f"""--
-- PostgreSQL database dump
--

\\restrict {key}

-- Dumped from database version {server}
-- Dumped by pg_dump version 18.6

SET statement_timeout = 0;
SET transaction_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);

--
-- Name: jobq; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA jobq;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: jobs; Type: TABLE; Schema: jobq; Owner: -
--

CREATE TABLE jobq.jobs (
    id bigint NOT NULL,
    queue text NOT NULL
);
{column_options}
--
-- Name: counts; Type: VIEW; Schema: jobq; Owner: -
--

CREATE VIEW jobq.counts AS
{view}

--
-- Name: every_queue; Type: VIEW; Schema: jobq; Owner: -
--

CREATE VIEW jobq.every_queue AS
 SELECT jobs.queue
   FROM jobq.jobs
UNION ALL
 SELECT jobs.queue
   FROM jobq.jobs;

--
-- PostgreSQL database dump complete
--

\\unrestrict {key}

"""


def test_dumps_of_one_schema_from_postgresql_15_and_18_read_alike() -> None:
    """What differs is left out or written one way: the versions, the run's key, the
    session's settings, the 15 server's `pg_attver` column option, and a one-table
    view's qualified columns (15 writes `jobs.queue`)."""
    fifteen = _dump(
        "15.20 (Debian 15.20-0+deb12u1)",
        "abc",
        "ALTER TABLE ONLY jobq.jobs ALTER COLUMN id SET (pg_attver=5980951512);\n"
        "ALTER TABLE ONLY jobq.jobs ALTER COLUMN queue SET (n_distinct=10, pg_attver=598095);",
        " SELECT jobs.queue,\n    'jobs.x'::text AS note\n"
        "   FROM jobq.jobs\n  GROUP BY jobs.queue;",
    )
    eighteen = _dump(
        "18.6",
        "xyz",
        "ALTER TABLE ONLY jobq.jobs ALTER COLUMN queue SET (n_distinct=10);",
        " SELECT queue,\n    'jobs.x'::text AS note\n   FROM jobq.jobs\n  GROUP BY queue;",
    )
    schema = normalised(fifteen, "0022")
    assert schema == normalised(eighteen, "0022")
    assert schema.startswith("-- The jobq schema at Alembic revision 0022,")
    assert schema.endswith("   FROM jobq.jobs;\n")
    for gone in ("restrict", "Dumped", "SET statement_timeout", "set_config", "default_table"):
        assert gone not in schema
    assert "SET (n_distinct=10);" in schema and "pg_attver" not in schema
    assert " SELECT queue,\n    'jobs.x'::text AS note\n" in schema
    assert "UNION ALL\n SELECT jobs.queue\n" in schema  # 15 and 18 alike
    assert "\n\n\n" not in schema
