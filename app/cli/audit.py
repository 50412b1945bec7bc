"""`jobq audit`: the audit log, newest first: who did which admin action when, and how
it ended (refused attempts too)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Annotated

import typer

from app.cli._output import console, narrow, parse_time, print_json, table, when
from app.cli._service import Session
from jobq_client import AuditEntry

MAX_PAGE = 500  # the most the service hands in one page
_AGO = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _since(value: str | None) -> datetime | None:
    """An RFC 3339 time, or a span back from now: 30m, 12h, 7d."""
    if value is None:
        return None
    span = _AGO.match(value)
    if span:
        return datetime.now(UTC) - timedelta(**{_UNITS[span[2]]: int(span[1])})
    try:
        found = parse_time(value)
    except ValueError:
        raise typer.BadParameter(
            "not a time (2026-11-28T09:00:00Z) nor a span (30m, 12h, 7d)"
        ) from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _target(entry: AuditEntry) -> str:
    """What the action named: its queue, job and key, schedule or subscription."""
    parts = [entry.queue, f"job {entry.job_id}" if entry.job_id is not None else None, entry.target]
    return " ".join(p for p in parts if p) or "-"


def audit(
    ctx: typer.Context,
    key: Annotated[str | None, typer.Option(help="Only this key's actions.")] = None,
    action: Annotated[
        str | None, typer.Option(help="Only this action (an operation id: purgeQueue).")
    ] = None,
    queue: Annotated[str | None, typer.Option(help="Only actions on this queue.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only since this time (RFC 3339) or span ago (30m, 12h, 7d)."),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="Entries shown, page after page.")
    ] = 100,
    before: Annotated[
        int | None, typer.Option(min=1, help="Only entries older than this id.")
    ] = None,
) -> None:
    """The audit log: who did which admin action when, newest first."""
    session = Session.of(ctx)
    found = session.jobq.iter_audit(
        key=key,
        action=action,
        queue=queue,
        since=_since(since),
        before=before,
        page_size=min(limit, MAX_PAGE),
    )
    entries = list(islice(found, limit))
    if session.as_json:
        print_json([e for page in session.answers for e in page["entries"]][:limit])
        return
    out = console()
    compact = narrow(out)
    rows = table(
        None,
        [("when" if compact else "at", "number"), ("key", "key"), ("action", "key"),
         ("target", "text"), ("status", "number")]
        + ([] if compact else [("request id", "text")]),
    )  # fmt: skip
    for entry in entries:
        cells = [
            when(entry.at, compact=compact),
            entry.key or "-",
            entry.action,
            _target(entry),
            str(entry.status),
        ]
        rows.add_row(*cells, *([] if compact else [entry.request_id]))
    out.print(rows if entries else "no audit entries")
    if len(entries) == limit:
        out.print(f"more: --before {entries[-1].id}", markup=False)
