"""`jobq queues settings`' push options: a queue's push target, or back to pulled."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jobq_client import PushTarget, PushTargetInfo

PushUrl = Annotated[
    str | None,
    typer.Option(help="Push its jobs to this URL (signed HTTP POSTs).", show_default=False),
]
PushSecret = Annotated[
    list[str] | None,
    typer.Option(
        help="A whsec_ signing secret; given twice while rotating.",
        show_default=False,
        metavar="<whsec_…>",
    ),
]
PushHeader = Annotated[
    list[str] | None,
    typer.Option(
        help="'Name: value' added to each delivery.", show_default=False, metavar="<header>"
    ),
]
PushTimeout = Annotated[
    float | None, typer.Option(help="Each delivery's deadline, seconds.", show_default=False)
]
Pull = Annotated[bool, typer.Option("--pull", help="Workers lease its jobs again: no push.")]


def push_change(
    url: str | None,
    secrets: list[str] | None,
    headers: list[str] | None,
    timeout: float | None,
    pull: bool,
) -> dict[str, Any]:
    """The `push` setting the options give ({} for none of them)."""
    if pull:
        if url or secrets or headers or timeout is not None:
            raise typer.BadParameter("--pull takes no other push option")
        return {"push": None}
    if url is None:
        if secrets or headers or timeout is not None:
            raise typer.BadParameter("--push-url names the target the options are for")
        return {}
    named: dict[str, str] = {}
    for header in headers or []:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{header!r}: expected 'Name: value'")
        named[name.strip()] = value.strip()
    return {"push": PushTarget(url, secrets or None, named or None, timeout)}


def shown(value: PushTargetInfo) -> str:
    """A target in one line: its URL, timeout, header names, secret fingerprints."""
    parts = [value.url, f"timeout {value.timeout_seconds:g}s"]
    if value.header_names:
        parts.append("headers " + ", ".join(value.header_names))
    parts.append("secrets " + ", ".join(value.secret_fingerprints))
    return "; ".join(parts)
