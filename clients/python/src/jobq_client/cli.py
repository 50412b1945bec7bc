"""Run a `Worker` found by name: `python -m jobq_client worker myapp.tasks:worker`.

`jobq worker` (the service's command) does the same when jobq is installed.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from jobq_client._client import API_KEY_ENV, URL_ENV, AsyncClient
from jobq_client._errors import JobqError
from jobq_client._worker import Worker


def load_worker(target: str) -> Worker:
    """The `Worker` at `module:attribute`, importing the module from the current directory."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{target!r}: expected module:attribute, e.g. myapp.tasks:worker")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found: object = importlib.import_module(module_name)
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            raise ValueError(f"{target!r}: {module_name} has no attribute {attribute}") from None
    if not isinstance(found, Worker):
        raise TypeError(f"{target!r} is a {type(found).__name__}, not a jobq_client.Worker")
    return found


def configure(
    worker: Worker,
    *,
    url: str | None = None,
    api_key: str | None = None,
    concurrency: int | None = None,
) -> Worker:
    """Point the worker at `url` with `api_key` (else what its client has), resize it."""
    if url or api_key:
        current = worker.client
        worker.client = AsyncClient(
            url or (current.base_url if current else None),
            api_key=api_key or (current.api_key if current else None),
        )
    if concurrency is not None:
        worker.concurrency = concurrency
    return worker


def run_worker(
    target: str,
    *,
    url: str | None = None,
    api_key: str | None = None,
    concurrency: int | None = None,
) -> None:
    """Load, configure and run a worker until SIGTERM or Ctrl-C (then it drains)."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    configure(load_worker(target), url=url, api_key=api_key, concurrency=concurrency).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobq_client", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("worker", help="run a Worker until SIGTERM or Ctrl-C")
    run.add_argument("target", help="the Worker object, as module:attribute")
    run.add_argument("--url", default=os.environ.get(URL_ENV), help=f"jobq's URL [{URL_ENV}]")
    run.add_argument("--api-key", default=os.environ.get(API_KEY_ENV), help=f"[{API_KEY_ENV}]")
    run.add_argument("--concurrency", type=int, help="jobs run at once")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run_worker(args.target, url=args.url, api_key=args.api_key, concurrency=args.concurrency)
    except (JobqError, ValueError, TypeError, ImportError) as exc:
        print(f"jobq worker: {exc}", file=sys.stderr)
        return 1
    return 0
