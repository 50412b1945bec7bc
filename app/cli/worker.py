"""`jobq worker`: run a Python worker written with the SDK."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli._database import setup_logging
from app.cli._output import fail
from app.cli._service import Session
from jobq_client import JobqError
from jobq_client.cli import run_worker


def worker(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(help="The jobq_client.Worker to run, as module:attribute.")
    ],
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Jobs run at once [default: the worker's own]")
    ] = None,
) -> None:
    """Run a Python worker until SIGTERM, then drain it.

    TARGET is the worker's module:attribute, e.g. myapp.tasks:worker. It needs the
    SDK in clients/python (`make run` installs it).
    """
    service = Session.of(ctx).jobq  # where the worker's own client is pointed
    setup_logging()
    try:
        run_worker(target, url=service.base_url, api_key=service.api_key, concurrency=concurrency)
    except (JobqError, ValueError, TypeError, ImportError) as exc:
        fail(f"worker: {exc}")
