"""`jobq worker`: run a Python worker written with the SDK."""

from __future__ import annotations

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
    """Run a Python worker (e.g. myapp.tasks:worker) until SIGTERM, then drain it.

    Needs the SDK in clients/python: pip install -e clients/python
    """
    try:
        from jobq_client import JobqError
        from jobq_client.cli import run_worker
    except ImportError:
        fail("jobq worker needs the Python SDK: pip install -e clients/python")
    service = Service.find(url, api_key)
    setup_logging()
    try:
        run_worker(target, url=service.url, api_key=service.api_key, concurrency=concurrency)
    except (JobqError, ValueError, TypeError, ImportError) as exc:
        fail(f"worker: {exc}")
