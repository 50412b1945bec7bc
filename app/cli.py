"""The `jobq` command: serve, migrate, openapi, worker; and the operator commands of `cli_ops`."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from app import cli_ops
from app.core import logging as jobq_logging
from app.core.config import get_settings
from app.core.metrics import MULTIPROC_ENV
from app.db.engine import resolve_database_url
from app.db.migrate import upgrade
from app.db.url import redacted

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
) -> None:
    """Apply pending migrations, then serve the API (Ctrl-C or SIGTERM stops it cleanly).

    With JOBQ_MIGRATE_ON_START=false it serves the schema as it is (run `jobq migrate`
    first, e.g. as a separate deploy step with a more privileged database role).
    """
    from app.main import create_app

    _setup_logging()
    settings = get_settings()
    url = asyncio.run(_database_url(migrate=settings.migrate_on_start))
    processes = workers or settings.workers
    options: dict[str, Any] = {
        "host": host or settings.host,
        "port": settings.port if port is None else port,
        "proxy_headers": False,
        "server_header": False,
        "log_config": None,
        "access_log": False,  # jobq logs each request itself (JOBQ_ACCESS_LOG)
        "timeout_graceful_shutdown": math.ceil(settings.shutdown_grace_seconds),
    }
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, _exit_cleanly)
    if processes == 1:
        uvicorn.Server(uvicorn.Config(create_app(settings, database_url=url), **options)).run()
        return
    # Each worker process builds its own app from the environment: hand them the
    # database this process resolved (the embedded server stays this process's to stop).
    os.environ["JOBQ_DATABASE_URL"] = url
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
