"""The `jobq` command, one module per command group.

    serve, migrate, openapi, worker     run the service, its schema, a Python worker
    stats, jobs, queues, schedules,     operators, through the Python SDK (`_service`)
    subscriptions, audit, workers
    keys                                API keys, straight in the database
    config                              what is configured, and from where

Every command prints through `_output`: tables that fit the terminal, `--output json`
for scripts, and `fail()`, one line on stderr and exit status 1, for every failure. The
commands that call the service are `_service.Operator` commands: their shared options
are declared there, once, and an SDK error becomes its one line there.
"""

from __future__ import annotations

import sys
from typing import Annotated

import pydantic
import typer

from app import __version__
from app.cli._output import warn
from app.cli._service import Connected, Operator, invalid_configuration
from app.cli.audit import audit
from app.cli.config import config
from app.cli.jobs import jobs_cli
from app.cli.keys import keys_cli
from app.cli.migrate import migrate, openapi
from app.cli.queues import queues_cli
from app.cli.schedules import schedules_cli
from app.cli.serve import serve, worker_app
from app.cli.stats import stats
from app.cli.subscriptions import subscriptions_cli
from app.cli.worker import worker
from app.cli.workers import workers_cli
from app.core.config import Settings

__all__ = ["cli", "main", "worker_app"]

cli = typer.Typer(
    rich_markup_mode=None,
    help="jobq: a PostgreSQL-backed job queue served over HTTP.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"max_content_width": 80},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"jobq {__version__}")
        raise typer.Exit()


@cli.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """jobq: a PostgreSQL-backed job queue served over HTTP."""


cli.command()(serve)
cli.command()(migrate)
cli.command()(openapi)
cli.command(cls=Connected)(worker)
cli.command(cls=Operator)(stats)
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(queues_cli, name="queues")
cli.add_typer(schedules_cli, name="schedules")
cli.add_typer(subscriptions_cli, name="subscriptions")
cli.add_typer(workers_cli, name="workers")
cli.add_typer(keys_cli, name="keys")
cli.command(cls=Operator)(audit)
cli.command(cls=Operator)(config)


def main() -> None:
    """The command; a setting that does not validate ends it with one line, whichever
    command read the settings first."""
    try:
        cli()
    except pydantic.ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        warn(invalid_configuration(exc))
        sys.exit(1)
