"""How every command talks to its user: tables that fit the terminal, `--output json` for
scripts (the service's answer as it sent it), and one way to report a failure (one line
on stderr, exit status 1).

Tables fold a long value onto more lines rather than cut it; numbers never wrap. At
80 columns, commands drop or merge the columns that matter least, never the key ones.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from jobq_client import Progress

PIPED_WIDTH = 200  # stdout that is not a terminal: wide enough that nothing folds
NARROW_WIDTH = 120  # below this, commands use their compact layout


class Output(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


OutputOption = Annotated[
    Output,
    typer.Option("--output", "-o", help="table for people, json for scripts."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Same as --output json.")]


def command_group(summary: str) -> typer.Typer:
    """A group of commands (`jobq jobs …`), its help as the root's: plain text.

    Rich help would read `[default: …]` in a help text as markup and drop it, and show
    `<bool>` beside every flag as if it took a value.
    """
    return typer.Typer(rich_markup_mode=None, help=summary, no_args_is_help=True)


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 1: how every command reports a failure."""
    warn(message)
    raise typer.Exit(1)


def warn(message: str) -> None:
    """One line on stderr that the command goes on after."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"jobq: {message}", markup=False)


def console() -> Console:
    """stdout for people; piped without COLUMNS, wide enough that no figure folds."""
    out = Console(highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, width=PIPED_WIDTH)
    return out


def narrow(out: Console) -> bool:
    return out.width < NARROW_WIDTH


def print_json(answer: Any) -> None:
    typer.echo(json.dumps(answer, indent=2, default=str))


KEY_WIDTH = 40  # a key value up to this long stays on one line; a longer one folds


class Rows(Table):
    """A table that keeps its key columns' values on one line (up to KEY_WIDTH), and
    makes the other columns fold or shrink instead. Its title is a line of its own
    above it, as wide as the terminal: a table's own title wraps at the table's width,
    mid-phrase when the table is narrower than its title."""

    def __init__(self, title: str | None, keys: set[int]) -> None:
        super().__init__(box=None, pad_edge=False, header_style="bold")
        self.heading = title
        self.keys = keys

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.heading:
            yield Text(self.heading, style="table.title")
        yield from super().__rich_console__(console, options)

    def add_row(self, *cells: Any, **options: Any) -> None:
        super().add_row(*cells, **options)
        for index in self.keys:
            column, cell = self.columns[index], cells[index]
            if isinstance(cell, str):
                width = min(len(cell), KEY_WIDTH)
                column.min_width = max(column.min_width or 0, width)


def table(title: str | None, columns: Sequence[tuple[str, str]]) -> Rows:
    """A table whose columns are (header, kind): `key` stays whole on one line (up to
    KEY_WIDTH characters), `number` is right-aligned and never wraps, `text` folds."""
    result = Rows(title, {i for i, (_, kind) in enumerate(columns) if kind == "key"})
    for header, kind in columns:
        if kind == "number":
            result.add_column(header, justify="right", no_wrap=True)
        else:
            result.add_column(header, overflow="fold")
    return result


# ---- figures for people --------------------------------------------------------------


def seconds(value: float | None) -> str:
    """A duration for people: 850ms, 12.3s, 4m05s, 2h03m, 3d04h; '-' for none."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.1f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


Instant = datetime | str | None  # a model's time, or one as the service wrote it (RFC 3339)


def parse_time(timestamp: datetime | str) -> datetime:
    if isinstance(timestamp, datetime):
        return timestamp
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def ago(timestamp: Instant) -> str:
    """'4m05s ago', 'in 10.0s', or 'never'."""
    if timestamp is None:
        return "never"
    delta = (datetime.now(UTC) - parse_time(timestamp)).total_seconds()
    return f"{seconds(delta)} ago" if delta >= 0 else f"in {seconds(-delta)}"


def when(timestamp: Instant, *, compact: bool) -> str:
    """A time: ISO 8601 to the second in UTC, or relative to now when `compact`."""
    if timestamp is None:
        return "-"
    if compact:
        return ago(timestamp)
    return parse_time(timestamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def count(value: int) -> str:
    return f"{value:,}"


def progress(value: Progress | dict[str, Any] | None) -> str:
    """'40% render …' from a job's progress (a model's, or as the service wrote it)."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        value = Progress.from_json(value)
    parts = [
        f"{value.percent:.0f}%" if value.percent is not None else "",
        value.stage or "",
        value.message or "",
    ]
    return " ".join(p for p in parts if p) or "-"
