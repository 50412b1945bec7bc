"""`jobq worker`: run a Python worker written with the SDK."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from app.cli._database import setup_logging
from app.cli._http import KeyOption, Service, UrlOption
from app.cli._output import fail


def worker(
    target: Annotated[
        str, typer.Argument(help="The jobq_client.Worker to run, as module:attribute.")
    ],
    url: UrlOption = None,
    api_key: KeyOption = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Jobs run at once [default: the worker's own]")
    ] = None,
) -> None:
    """Run a Python worker until SIGTERM, then drain it.

    TARGET is the worker's module:attribute, e.g. myapp.tasks:worker. It needs the
    SDK in clients/python (`make run` installs it).
    """
    try:
        from jobq_client import JobqError
        from jobq_client.cli import run_worker
    except ImportError:
        # This interpreter's pip: a bare `pip` may be another environment's.
        fail(f"jobq worker needs the Python SDK: {sys.executable} -m pip install -e clients/python")
    service = Service.find(url, api_key)
    setup_logging()
    try:
        run_worker(target, url=service.url, api_key=service.api_key, concurrency=concurrency)
    except (JobqError, ValueError, TypeError, ImportError) as exc:
        fail(f"worker: {exc}")
