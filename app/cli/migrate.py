"""`jobq migrate` and `jobq openapi`: the schema of the database, and of the API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from app.cli._database import database_url, reported_connect_failure, setup_logging

DEFAULT_OPENAPI_PATH = Path("openapi/openapi.json")


def migrate() -> None:
    """Apply pending database migrations, then exit."""
    setup_logging()
    with reported_connect_failure():
        asyncio.run(database_url(migrate=True))


def openapi(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write it; '-' for stdout.")
    ] = DEFAULT_OPENAPI_PATH,
) -> None:
    """Write the OpenAPI document the service serves.

    Commit it: clients use it.
    """
    from app.main import create_app

    document = json.dumps(create_app().openapi(), indent=2, sort_keys=False) + "\n"
    if str(output) == "-":
        typer.echo(document, nl=False)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(document)
    typer.echo(f"wrote {output}")
