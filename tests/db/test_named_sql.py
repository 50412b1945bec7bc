"""Each domain's named SQL (every `.sql` file of app/, tests/fixtures/queries.py) is loaded
by the repository beside it, prepares on the real schema, and runs in psql as written;
typed rows match their tables column for column. (That each statement is bound, with
its parameters' type: tests/unit/test_statement_params.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
import pytest

from app.db.statement import Statement
from app.jobs import repository as jobs_sql
from app.jobs.rows import FinishedBrief, JobRow
from app.keys.rows import KeyRow
from app.schedules.rows import ScheduleRow
from tests.conftest import plain
from tests.fixtures.queries import REPOSITORIES, SQL_FILES


def test_every_sql_file_of_the_app_is_loaded_by_the_repository_beside_it() -> None:
    loaded = [(path.resolve(), module) for module in REPOSITORIES for path in module.QUERIES.paths]
    assert sorted(path for path, _ in loaded) == list(SQL_FILES), "each file, by one repository"
    for path, module in loaded:
        assert path.parent == Path(str(module.__file__)).parent, (path, module.__name__)


@pytest.mark.parametrize("module", REPOSITORIES, ids=lambda m: m.__name__)
async def test_every_statement_prepares_on_the_migrated_schema(
    db: asyncpg.Connection, module: ModuleType
) -> None:
    for statement in module.QUERIES.statements.values():
        prepared = await db.prepare(statement.sql)
        assert len(prepared.get_parameters()) == len(statement.names), statement.name


@pytest.mark.parametrize(
    ("row", "table"),
    [(JobRow, "jobs"), (KeyRow, "api_keys"), (ScheduleRow, "schedules")],
    ids=["jobs", "api_keys", "schedules"],
)
async def test_typed_rows_hold_every_column_in_the_tables_order(
    db: asyncpg.Connection, row: type[JobRow] | type[KeyRow] | type[ScheduleRow], table: str
) -> None:
    columns = await db.fetch(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'jobq' AND table_name = $1 ORDER BY ordinal_position",
        table,
    )
    assert list(row._fields) == [c["column_name"] for c in columns]


@pytest.mark.parametrize(
    ("statement", "row"),
    [
        (jobs_sql.LEASE, JobRow),
        (jobs_sql.LEASE_QUEUE, JobRow),
        (jobs_sql.LEASE_LIMITED, JobRow),
        (jobs_sql.LEASE_FAIR, JobRow),
        (jobs_sql.COMPLETE_MANY, FinishedBrief),
        (jobs_sql.FINISH_MANY, FinishedBrief),
    ],
    ids=lambda value: getattr(value, "name", None) or value.__name__,
)
async def test_statements_read_into_rows_by_position_answer_exactly_their_columns(
    db: asyncpg.Connection, statement: Statement[Any], row: type[JobRow] | type[FinishedBrief]
) -> None:
    # rows.many builds these rows by position, with no length check of its own
    prepared = await db.prepare(statement.sql)
    assert [a.name for a in prepared.get_attributes()] == list(row._fields)


def _quoted(value: str) -> str:
    return value.replace("'", "''")


def test_a_statement_runs_in_psql_as_written(database_url: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        if os.environ.get("CI"):
            pytest.fail("psql is needed to run a statement as written")
        pytest.skip("psql is not installed")
    text = next(p for p in jobs_sql.QUERIES.paths if p.name == "enqueue.sql").read_text()
    start = text.index("-- name: enqueue_one")
    statement = text[start : text.index("-- name:", start + 1)]
    variables = {
        "queue": "'psql'",
        "type": "'t'",
        "payload": '\'{"from": "psql"}\'',
        "priority": "0",
        "run_at": "NULL",
        "delay_seconds": "0",
        "max_attempts": "5",
        "lease_seconds": "60",
        "idempotency_key": "'by-hand'",
        "metadata": "'{}'",
        "concurrency_key": "NULL",
        "default_max_attempts": "5",
        "default_lease_seconds": "60",
        "runs_on_parent_failure": "false",
        "fairness_key": "NULL",
        "unique": "NULL",
        "timeout_seconds": "NULL",
        "start_by": "NULL",
        "traceparent": "'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'",
        "tracestate": "NULL",
    }
    # psql puts a variable in as written, and reads `''` inside quotes as one quote:
    # `\set queue '''psql'''` is the SQL literal 'psql'.
    script = "".join(f"\\set {k} '{_quoted(v)}'\n" for k, v in variables.items()) + statement
    result = subprocess.run(
        [psql, plain(database_url), "-X", "-v", "ON_ERROR_STOP=1", "-At", "-F", "|"],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    job_id, queue = result.stdout.strip().split("|")[:2]
    assert queue == "psql" and int(job_id) > 0
