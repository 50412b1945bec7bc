"""The `jobq` command: serve, migrate, openapi, keys, worker; and the operator commands of
`cli_ops`."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from fastapi import FastAPI
from rich.console import Console
from rich.table import Table
from uvicorn.supervisors import Multiprocess

from app import cli_ops
from app.core import logging as jobq_logging
from app.core.config import Settings, get_settings
from app.core.errors import DatabaseUnavailable, JobqError
from app.core.metrics import MULTIPROC_ENV
from app.db.database import Database
from app.db.engine import create_engine, resolve_database_url
from app.db.migrate import upgrade
from app.db.url import redacted
from app.keys import (
    KEY_PREFIX,
    KeyRow,
    Keys,
    KeysRepository,
    is_loopback,
    open_network_refusal,
)

cli = typer.Typer(
    help="jobq: a PostgreSQL-backed job queue served over HTTP.",
    no_args_is_help=True,
    add_completion=False,
)
log = logging.getLogger("jobq")
DEFAULT_OPENAPI_PATH = Path("openapi/openapi.json")


def _setup_logging() -> None:
    settings = get_settings()
    jobq_logging.configure(settings.log_format, settings.log_level)


def worker_app() -> FastAPI:
    """The app of one `jobq serve --workers N` process, logging as the parent does."""
    from app.main import create_app

    _setup_logging()
    return create_app()


def _exit_cleanly(signum: int, _frame: object) -> None:
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again. The
    # default handlers would kill the process (or raise KeyboardInterrupt) instead of a
    # normal exit, which is what lets atexit stop the embedded server.
    raise SystemExit(0)


async def _database_url(*, migrate: bool) -> str:
    url = await resolve_database_url(get_settings())
    log.info("database: %s", redacted(url))
    if migrate:
        await upgrade(url)
        log.info("schema is up to date")
    return url


@cli.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind [default: JOBQ_HOST or 127.0.0.1]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port [default: JOBQ_PORT or 8000]")] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Service processes sharing the port [default: JOBQ_WORKERS or 1]"),
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option(help="Serve HTTPS with this private key (PEM)")
    ] = None,
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="... and this certificate chain (PEM)")
    ] = None,
) -> None:
    """Apply pending migrations, then serve the API (Ctrl-C or SIGTERM stops it cleanly).

    With JOBQ_MIGRATE_ON_START=false it serves the schema as it is (run `jobq migrate`
    first, e.g. as a separate deploy step with a more privileged database role).
    Beyond loopback it refuses to start until an API key exists (`jobq keys create`),
    unless JOBQ_AUTH=disabled.
    """
    from app.main import create_app

    if ssl_keyfile is not None and ssl_certfile is None:
        raise typer.BadParameter("--ssl-keyfile needs --ssl-certfile", param_hint="--ssl-keyfile")
    _setup_logging()
    settings = get_settings()
    bind = host or settings.host
    settings = settings.model_copy(update={"host": bind})  # the app decides its auth by it
    url = asyncio.run(_database_url(migrate=settings.migrate_on_start))
    _refuse_open_network(settings, url)
    processes = workers or settings.workers
    options: dict[str, Any] = {
        "host": bind,
        "port": settings.port if port is None else port,
        "proxy_headers": False,
        "server_header": False,
        "log_config": None,
        "access_log": False,  # jobq logs each request itself (JOBQ_ACCESS_LOG)
        "timeout_graceful_shutdown": math.ceil(settings.shutdown_grace_seconds),
    }
    if ssl_certfile is not None:
        options["ssl_certfile"] = str(ssl_certfile)
        options["ssl_keyfile"] = str(ssl_keyfile) if ssl_keyfile is not None else None
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, _exit_cleanly)
    if processes == 1:
        uvicorn.Server(uvicorn.Config(create_app(settings, database_url=url), **options)).run()
        return
    # Each worker process builds its own app from the environment: hand them the
    # database this process resolved (the embedded server stays this process's to stop).
    os.environ["JOBQ_DATABASE_URL"] = url
    os.environ["JOBQ_HOST"] = bind  # each process decides its authentication by it
    # One metrics store for all workers, so any of them answers a scrape with the sum.
    own_dir = None
    if MULTIPROC_ENV not in os.environ:
        own_dir = tempfile.mkdtemp(prefix="jobq-metrics-")
        os.environ[MULTIPROC_ENV] = own_dir
    config = uvicorn.Config("app.cli:worker_app", factory=True, workers=processes, **options)
    try:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    finally:
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


@cli.command()
def migrate() -> None:
    """Apply pending database migrations, then exit."""
    _setup_logging()
    asyncio.run(_database_url(migrate=True))


@cli.command()
def openapi(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write it; '-' for stdout.")
    ] = DEFAULT_OPENAPI_PATH,
) -> None:
    """Write the OpenAPI document the service serves (commit it: clients are generated from it)."""
    from app.main import create_app

    document = json.dumps(create_app().openapi(), indent=2, sort_keys=False) + "\n"
    if str(output) == "-":
        typer.echo(document, nl=False)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(document)
    typer.echo(f"wrote {output}")


def _refuse_open_network(settings: Settings, url: str) -> None:
    """Exit before serving the network openly: no API key, not loopback, auth not disabled.

    The app checks the same at startup; checking here gives a plain message and a
    non-zero exit. A database that does not answer yet leaves the decision to the app,
    which then requires keys beyond loopback.
    """
    if settings.auth == "disabled" or is_loopback(settings.host):
        return
    try:
        exists = asyncio.run(_any_key(url))
    except DatabaseUnavailable:
        return
    if not exists:
        log.error("%s", open_network_refusal(settings.host))
        raise typer.Exit(1)


async def _any_key(url: str) -> bool:
    engine = create_engine(url, 1)
    try:
        return await KeysRepository(Database(engine)).any()
    finally:
        await engine.dispose()


# ---- jobq keys ------------------------------------------------------------------------

keys_cli = typer.Typer(
    help="Create, list and revoke API keys, straight in the database (like `jobq migrate`).",
    no_args_is_help=True,
)
cli.add_typer(keys_cli, name="keys")
_err = Console(stderr=True)


@asynccontextmanager
async def _keys() -> AsyncIterator[Keys]:
    """The key store of the configured database (migrated first, as `serve` would)."""
    url = await _database_url(migrate=get_settings().migrate_on_start)
    engine = create_engine(url, 1)
    try:
        yield Keys(KeysRepository(Database(engine)))
    finally:
        await engine.dispose()


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


def _fail(error: JobqError) -> typer.Exit:
    _err.print(f"[red]error:[/red] {error.detail}", highlight=False)
    return typer.Exit(1)


@keys_cli.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="A unique name, e.g. the service using the key")],
    scopes: Annotated[str, typer.Option(help="Comma-separated: enqueue, work, read, admin")],
    queues: Annotated[
        str | None,
        typer.Option(help="Comma-separated queue names or patterns ('reports.*') [default: all]"),
    ] = None,
) -> None:
    """Create an API key and print it (on stdout, alone): it is never shown again."""

    async def create() -> tuple[str, KeyRow]:
        async with _keys() as keys:
            return await keys.create(name, _split(scopes) or [], _split(queues))

    try:
        key, row = asyncio.run(create())
    except JobqError as error:
        raise _fail(error) from None
    where = ", ".join(row.queues) if row.queues is not None else "every queue"
    _err.print(
        f"Created API key {name!r}: {', '.join(row.scopes)} on {where}. "
        "Store it now: it is not shown again.",
        highlight=False,
    )
    typer.echo(key)


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value is not None else "-"


@keys_cli.command("list")
def keys_list() -> None:
    """List API keys, revoked ones too (never the keys themselves)."""

    async def fetch() -> list[KeyRow]:
        async with _keys() as keys:
            return list(await keys.list())

    table = Table("Name", "Prefix", "Scopes", "Queues", "Created", "Last used", "Revoked")
    for row in asyncio.run(fetch()):
        table.add_row(
            row.name,
            KEY_PREFIX + row.lookup_id,
            ",".join(row.scopes),
            ",".join(row.queues) if row.queues is not None else "*",
            _when(row.created_at),
            _when(row.last_used_at),
            _when(row.revoked_at),
        )
    Console().print(table)


@keys_cli.command("revoke")
def keys_revoke(name: Annotated[str, typer.Argument(help="The key's name")]) -> None:
    """Revoke an API key: every running jobq refuses it at once."""

    async def revoke() -> KeyRow:
        async with _keys() as keys:
            return await keys.revoke(name)

    try:
        row = asyncio.run(revoke())
    except JobqError as error:
        raise _fail(error) from None
    _err.print(f"Revoked API key {name!r} ({KEY_PREFIX}{row.lookup_id}…).", highlight=False)


@cli.command()
def worker(
    target: Annotated[
        str, typer.Argument(help="The jobq_client.Worker to run, as module:attribute.")
    ],
    url: Annotated[
        str | None,
        typer.Option(envvar="JOBQ_URL", help="jobq's URL (default: the worker's own client's)"),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="JOBQ_API_KEY", help="Sent as a Bearer token.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Jobs run at once (default: the worker's own)")
    ] = None,
) -> None:
    """Run a Python worker (e.g. myapp.tasks:worker) until SIGTERM or Ctrl-C, then drain it.

    Needs the SDK in clients/python: pip install -e clients/python
    """
    try:
        from jobq_client import JobqError
        from jobq_client.cli import run_worker
    except ImportError:
        typer.echo("jobq worker needs the Python SDK: pip install -e clients/python", err=True)
        raise typer.Exit(2) from None
    _setup_logging()
    try:
        run_worker(target, url=url, api_key=api_key, concurrency=concurrency)
    except (JobqError, ValueError, TypeError, ImportError) as exc:
        typer.echo(f"jobq worker: {exc}", err=True)
        raise typer.Exit(1) from None


cli_ops.register(cli)


def main() -> None:
    cli()
