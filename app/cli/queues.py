"""`jobq queues …`: list and show queues; pause, resume, purge, redrive; their settings."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli._http import KeyOption, Service, UrlOption
from app.cli._output import (
    JsonFlag,
    Output,
    OutputOption,
    console,
    count,
    print_json,
    seconds,
    table,
    wants_json,
)
from app.cli.jobs import YesOption
from app.cli.stats import show_queue

queues_cli = typer.Typer(
    help="List and show queues; pause, resume, purge, redrive; their settings.",
    no_args_is_help=True,
)
QueueArgument = Annotated[str, typer.Argument(help="The queue's name.")]


def _say(answer: dict[str, Any], as_json: bool, line: str) -> None:
    if as_json:
        print_json(answer)
    else:
        typer.echo(line)


@queues_cli.command("list")
def list_queues(
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Every known queue: paused or not, and its jobs by state."""
    answer = Service.find(url, api_key).call("GET", "/v1/queues")
    if wants_json(output, as_json):
        print_json(answer["queues"])
        return
    rows = table(
        None,
        [("queue", "key"), ("state", "key"), ("queued", "number"), ("running", "number"),
         ("failed", "number"), ("oldest due", "number")],
    )  # fmt: skip
    for q in answer["queues"]:
        c = q["counts"]
        rows.add_row(
            q["queue"],
            "paused" if q["paused"] else "active",
            count(c["queued"]),
            count(c["running"]),
            count(c["failed"]),
            seconds(q["oldest_due_age_seconds"]),
        )
    console().print(rows if answer["queues"] else "no queues yet")


@queues_cli.command("show")
def show(
    queue: QueueArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """One queue's figures and its longest-running jobs (as `jobq stats QUEUE`)."""
    show_queue(Service.find(url, api_key), queue, wants_json(output, as_json))


def _state_line(answer: dict[str, Any]) -> str:
    if answer.get("paused"):
        return f"queue {answer['queue']}: paused since {answer.get('paused_at')}"
    return f"queue {answer['queue']}: active"


@queues_cli.command("pause")
def pause(
    queue: QueueArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Pause a queue: leasing skips it, enqueueing still works."""
    answer = Service.find(url, api_key).call("POST", f"/v1/queues/{queue}/pause", body={})
    _say(answer, wants_json(output, as_json), _state_line(answer))


@queues_cli.command("resume")
def resume(
    queue: QueueArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Resume a paused queue."""
    answer = Service.find(url, api_key).call("POST", f"/v1/queues/{queue}/resume", body={})
    _say(answer, wants_json(output, as_json), _state_line(answer))


@queues_cli.command("purge")
def purge(
    queue: QueueArgument,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Delete every queued job of a queue (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete every queued job of queue {queue!r}?", abort=True, err=True)
    answer = Service.find(url, api_key).call(
        "POST", f"/v1/queues/{queue}/purge", body={"confirm": queue}
    )
    _say(answer, wants_json(output, as_json), f"queue {queue}: {answer['deleted']} jobs deleted")


@queues_cli.command("redrive")
def redrive(
    queue: QueueArgument,
    type_: Annotated[str | None, typer.Option("--type", help="Only jobs of this type.")] = None,
    error_type: Annotated[
        str | None, typer.Option(help="Only jobs whose last error has this type.")
    ] = None,
    failed_since: Annotated[
        str | None, typer.Option(help="Only jobs that failed since (RFC 3339).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 1000,
    reset_attempts: Annotated[
        bool, typer.Option("--reset-attempts", help="Give them all their attempts again.")
    ] = False,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Send a queue's failed jobs back to it, oldest failure first (asks unless --yes)."""
    if not yes:
        typer.confirm(f"Run failed jobs of queue {queue!r} again?", abort=True, err=True)
    body = {
        "type": type_,
        "error_type": error_type,
        "failed_since": failed_since,
        "limit": limit,
        "reset_attempts": reset_attempts,
    }
    answer = Service.find(url, api_key).call(
        "POST",
        f"/v1/queues/{queue}/failed/retry",
        body={k: v for k, v in body.items() if v is not None},
    )
    line = f"queue {queue}: {answer['retried']} failed jobs queued again"
    _say(answer, wants_json(output, as_json), line)


def _max_backlog(value: str) -> int | None:
    if value.lower() in ("none", "null", "unlimited"):
        return None
    try:
        number = int(value)
    except ValueError:
        raise typer.BadParameter("a number of jobs, or 'none' for no limit") from None
    return number


@queues_cli.command("settings")
def settings(
    queue: QueueArgument,
    max_backlog: Annotated[
        str | None,
        typer.Option(
            help="Enqueue answers 429 once the queue holds this many unfinished jobs; 'none'.",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Show a queue's settings, or change those given."""
    service = Service.find(url, api_key)
    path = f"/v1/queues/{queue}/settings"
    if max_backlog is None:
        answer = service.call("GET", path)
    else:
        answer = service.call("PUT", path, body={"max_backlog": _max_backlog(max_backlog)})
    if wants_json(output, as_json):
        print_json(answer)
        return
    rows = table(f"settings of {queue}", [("setting", "key"), ("value", "text")])
    rows.show_header = False
    for name, value in answer.items():
        if name != "queue":
            rows.add_row(name, "none" if value is None else str(value))
    console().print(rows)
