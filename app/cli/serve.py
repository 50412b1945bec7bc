"""`jobq serve`: apply pending migrations, then serve the API."""

from __future__ import annotations

import asyncio
import gc
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

from app.cli._database import database_url, reported_connect_failure, setup_logging
from app.core.config import Settings, get_settings
from app.core.errors import DatabaseUnavailable
from app.core.metrics import MULTIPROC_ENV
from app.db.database import Database
from app.db.engine import behind_pooler, create_engine
from app.keys import KeysRepository, is_loopback, open_network_refusal

log = logging.getLogger("jobq")


def worker_app() -> FastAPI:
    """The app of one `jobq serve --workers N` process, logging as the parent does."""
    from app.main import create_app

    setup_logging()
    return frozen(create_app())


def frozen(app: FastAPI) -> FastAPI:
    """`app`, once every object made so far (the modules, the app's routes and schemas:
    the process's whole life) is out of the garbage collector's reach: its full
    collections then walk only what requests made, not the whole program again
    (docs/performance/service.md, "Full garbage collections")."""
    gc.collect()  # the start-up's garbage first: what is frozen is never collected
    gc.freeze()
    return app


def _exit_cleanly(signum: int, _frame: object) -> None:
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again. The
    # default handlers would kill the process (or raise KeyboardInterrupt) instead of a
    # normal exit, which is what lets atexit stop the embedded server.
    raise SystemExit(0)


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind [default: JOBQ_HOST or 127.0.0.1]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port [default: JOBQ_PORT or 8000]")] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Processes sharing the port [default: JOBQ_WORKERS or 1]"),
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option(help="Serve HTTPS with this private key (PEM)")
    ] = None,
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="The certificate chain for --ssl-keyfile (PEM)")
    ] = None,
) -> None:
    """Apply pending migrations, then serve the API.

    Ctrl-C or SIGTERM stops it.
    With JOBQ_MIGRATE_ON_START=false it serves the schema as it is (run `jobq migrate`
    first, e.g. as a separate deploy step with a more privileged database role).
    Beyond loopback it refuses to start until an API key exists (`jobq keys create`),
    unless JOBQ_AUTH=disabled.
    """
    from app.main import create_app

    if ssl_keyfile is not None and ssl_certfile is None:
        raise typer.BadParameter("--ssl-keyfile needs --ssl-certfile", param_hint="--ssl-keyfile")
    setup_logging()
    settings = get_settings()
    bind = host or settings.host
    settings = settings.model_copy(update={"host": bind})  # the app decides its auth by it
    with reported_connect_failure():
        url = asyncio.run(database_url(migrate=settings.migrate_on_start))
    _refuse_open_network(settings, url)
    processes = workers or settings.workers
    options: dict[str, Any] = {
        "host": bind,
        "port": settings.port if port is None else port,
        "proxy_headers": False,
        "server_header": False,
        "log_config": None,
        "access_log": False,  # jobq logs each request itself (JOBQ_ACCESS_LOG)
        "http": "httptools",
        "timeout_graceful_shutdown": math.ceil(settings.shutdown_grace_seconds),
    }
    if ssl_certfile is not None:
        options["ssl_certfile"] = str(ssl_certfile)
        options["ssl_keyfile"] = str(ssl_keyfile) if ssl_keyfile is not None else None
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, _exit_cleanly)
    if processes == 1:
        app = frozen(create_app(settings, database_url=url))
        uvicorn.Server(uvicorn.Config(app, **options)).run()
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
    config = uvicorn.Config("app.cli.serve:worker_app", factory=True, workers=processes, **options)
    try:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    finally:
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


def _refuse_open_network(settings: Settings, url: str) -> None:
    """Exit before serving the network openly: no API key, not loopback, auth not disabled.

    The app checks the same at startup; checking here gives a plain message and a
    non-zero exit. A database that does not answer yet leaves the decision to the app,
    which then requires keys beyond loopback.
    """
    if settings.auth == "disabled" or is_loopback(settings.host):
        return
    try:
        exists = asyncio.run(_any_key(url, pooler=behind_pooler(settings)))
    except DatabaseUnavailable:
        return
    if not exists:
        log.error("%s", open_network_refusal(settings.host))
        raise typer.Exit(1)


async def _any_key(url: str, *, pooler: bool) -> bool:
    engine = create_engine(url, 1, pooler=pooler)
    try:
        return await KeysRepository(Database(engine)).any()
    finally:
        await engine.dispose()
