"""`jobq keys …`: create, list and revoke API keys, straight in the database (as `jobq
migrate` works), so the first key can be made before the service is exposed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, TypeVar

import typer

from app.cli._database import engine, reported_connect_failure
from app.cli._output import command_group, console, fail, print_json, table
from app.cli._service import Printing, Session
from app.core.config import get_settings
from app.core.errors import JobqError
from app.db.database import Database
from app.keys import KEY_PREFIX, SCOPES, Keys, KeysRepository, key_view

keys_cli = command_group("Create, list and revoke API keys, straight in the database.")
T = TypeVar("T")


def _with_keys(action: Callable[[Keys], Awaitable[T]]) -> T:
    """`action` on the configured database's key store (migrated first, as `serve` does);
    a refusal ends the command through `fail`."""

    async def run() -> T:
        async with engine(migrate=get_settings().migrate_on_start) as pool:
            return await action(Keys(KeysRepository(Database(pool))))

    try:
        with reported_connect_failure():
            return asyncio.run(run())
    except JobqError as error:
        fail(error.detail)


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


@keys_cli.command("create", cls=Printing)
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option(help="A unique name, e.g. the service using the key.")],
    scopes: Annotated[str, typer.Option(help=f"Comma-separated: {', '.join(SCOPES)}.")],
    queues: Annotated[
        str | None,
        typer.Option(help="Comma-separated queue names or patterns ('reports.*') [default: all]"),
    ] = None,
) -> None:
    """Create an API key and print it, alone, on stdout.

    Keep it: it is never shown again.
    """
    key, row = _with_keys(lambda keys: keys.create(name, _split(scopes) or [], _split(queues)))
    if Session.of(ctx).as_json:
        print_json({**key_view(row), "key": key})
        return
    where = ", ".join(row.queues) if row.queues is not None else "every queue"
    typer.echo(
        f"Created API key {name!r}: {', '.join(row.scopes)} on {where}. "
        "Store it now: it is not shown again.",
        err=True,
    )
    typer.echo(key)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


@keys_cli.command("list", cls=Printing)
def list_keys(ctx: typer.Context) -> None:
    """List API keys, revoked ones too (never the keys themselves)."""
    rows = _with_keys(lambda keys: keys.list())
    if Session.of(ctx).as_json:
        print_json([key_view(row) for row in rows])
        return
    shown = table(
        None,
        [("name", "key"), ("prefix", "key"), ("scopes", "key"), ("queues", "key"),
         ("created", "number"), ("last used", "number"), ("revoked", "number")],
    )  # fmt: skip
    for row in rows:
        shown.add_row(
            row.name,
            KEY_PREFIX + row.lookup_id,
            ",".join(row.scopes),
            ",".join(row.queues) if row.queues is not None else "*",
            _when(row.created_at),
            _when(row.last_used_at),
            _when(row.revoked_at),
        )
    console().print(shown)


@keys_cli.command("revoke", cls=Printing)
def revoke(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The key's name.")]
) -> None:
    """Revoke an API key: every running jobq refuses it at once."""
    row = _with_keys(lambda keys: keys.revoke(name))
    if Session.of(ctx).as_json:
        print_json(key_view(row))
        return
    typer.echo(f"Revoked API key {name!r} ({KEY_PREFIX}{row.lookup_id}…).", err=True)
