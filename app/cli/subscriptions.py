"""`jobq subscriptions …`: list, show, set, delete event subscriptions, and reset one's
breaker."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli._output import command_group, console, print_json, table
from app.cli._service import Operator, Session

subscriptions_cli = command_group("List, show, set and delete event subscriptions.")
NameArgument = Annotated[str, typer.Argument(help="The subscription's name.")]
Many = Annotated[list[str] | None, typer.Option(help="Repeat for several; none: all.")]


def _show(session: Session, found: dict[str, Any]) -> None:
    if session.as_json:
        print_json(found)
        return
    out = console()
    for key in ("name", "url", "queues", "types", "kinds", "paused", "position", "attempts",
                "last_status", "last_error", "delivered_at", "missed"):  # fmt: skip
        out.print(f"{key}: {found.get(key)}")
    out.print(f"breaker: {found['breaker']['state']}")
    if found.get("secret"):
        out.print(f"secret (shown once): {found['secret']}")


@subscriptions_cli.command("list", cls=Operator)
def list_subscriptions(ctx: typer.Context) -> None:
    """Every event subscription: its URL, cursor and breaker."""
    session = Session.of(ctx)
    found = session.jobq.list_subscriptions()
    if session.as_json:
        print_json(found)
        return
    rows = table(
        None,
        [("name", "key"), ("url", "text"), ("position", "number"), ("status", "text"),
         ("breaker", "text")],
    )  # fmt: skip
    for s in found:
        rows.add_row(
            s["name"], s["url"], str(s["position"]), str(s["last_status"] or "-"),
            s["breaker"]["state"],
        )  # fmt: skip
    console().print(rows if found else "no subscriptions yet")


@subscriptions_cli.command("show", cls=Operator)
def show_subscription(ctx: typer.Context, name: NameArgument) -> None:
    """One event subscription."""
    session = Session.of(ctx)
    _show(session, session.jobq.get_subscription(name))


@subscriptions_cli.command("set", cls=Operator)
def set_subscription(
    ctx: typer.Context,
    name: NameArgument,
    target: Annotated[str, typer.Option(help="The URL the events are POSTed to.")],
    queue: Many = None,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="Job types; repeat for several.")
    ] = None,
    kind: Many = None,
    secret: Many = None,
    paused: Annotated[bool, typer.Option(help="Deliver nothing for now.")] = False,
) -> None:
    """Create or replace an event subscription.

    A new one without --secret gets a secret made for it, shown this once."""
    session = Session.of(ctx)
    found = session.jobq.set_subscription(
        name, target, queues=queue, types=type_, kinds=kind, secrets=secret, paused=paused
    )
    _show(session, found)


@subscriptions_cli.command("delete", cls=Operator)
def delete_subscription(ctx: typer.Context, name: NameArgument) -> None:
    """Delete an event subscription."""
    session = Session.of(ctx)
    session.jobq.delete_subscription(name)
    if not session.as_json:
        console().print(f"deleted subscription {name}")


@subscriptions_cli.command("reset", cls=Operator)
def reset_subscription(ctx: typer.Context, name: NameArgument) -> None:
    """Close a subscription's breaker: it delivers again."""
    session = Session.of(ctx)
    _show(session, session.jobq.reset_subscription(name))
