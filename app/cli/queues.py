"""`jobq queues …`: list and show queues; pause, resume, purge, redrive; their settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from app.cli._http import KeyOption, Service, UrlOption
from app.cli._output import (
    JsonFlag,
    Output,
    OutputOption,
    command_group,
    console,
    count,
    print_json,
    seconds,
    table,
    wants_json,
)
from app.cli.jobs import YesOption
from app.cli.stats import show_queue

queues_cli = command_group("Queues: list, show, pause, resume, purge, redrive, settings.")
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
    """One queue's figures and its longest-running jobs.

    The same as `jobq stats QUEUE`.
    """
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
    """Send a queue's failed jobs back to it, oldest failure first.

    Asks first, unless --yes.
    """
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


def _none(value: str) -> bool:
    return value.lower() in ("none", "null", "unlimited", "default")


def _whole(value: str) -> int | None:
    """A whole number, or None for 'none'."""
    if _none(value):
        return None
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter("a whole number, or 'none'") from None


def _number(value: str) -> float | None:
    """A number, or None for 'none'."""
    if _none(value):
        return None
    try:
        return float(value)
    except ValueError:
        raise typer.BadParameter("a number, or 'none'") from None


def _rate(value: str) -> dict[str, float] | None:
    """'100/60' (100 jobs per 60 seconds), or None for 'none'."""
    if _none(value):
        return None
    jobs, _, per = value.partition("/")
    try:
        return {"jobs": int(jobs), "per_seconds": float(per.removesuffix("s"))}
    except ValueError:
        raise typer.BadParameter("JOBS/SECONDS, such as 100/60, or 'none'") from None


def _option(help_text: str) -> Any:
    return typer.Option(help=f"{help_text}; 'none' clears it.", show_default=False)


# option name → (the API's field, how to read the value)
_SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "max_backlog": ("max_backlog", _whole),
    "max_running": ("max_running", _whole),
    "max_running_per_key": ("max_running_per_key", _whole),
    "rate_limit": ("rate_limit", _rate),
    "max_attempts": ("max_attempts", _whole),
    "lease_seconds": ("lease_seconds", _whole),
    "backoff_base": ("backoff_base_seconds", _number),
    "backoff_cap": ("backoff_cap_seconds", _number),
    "backoff_jitter": ("backoff_jitter", _number),
    "retain_succeeded": ("retain_succeeded_seconds", _number),
    "retain_failed": ("retain_failed_seconds", _number),
}


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "none"
    if name == "rate_limit":
        return f"{value['jobs']} per {value['per_seconds']:g}s"
    return str(value)


@queues_cli.command("settings")
def settings(
    queue: QueueArgument,
    max_backlog: Annotated[
        str | None, _option("Enqueue answers 429 once this many jobs are unfinished")
    ] = None,
    max_running: Annotated[str | None, _option("At most this many jobs run at once")] = None,
    max_running_per_key: Annotated[
        str | None, _option("At most this many jobs per concurrency key run at once")
    ] = None,
    rate_limit: Annotated[
        str | None, _option("At most JOBS leases per SECONDS, as JOBS/SECONDS")
    ] = None,
    max_attempts: Annotated[str | None, _option("Default attempts of its jobs")] = None,
    lease_seconds: Annotated[str | None, _option("Default lease of its jobs")] = None,
    backoff_base: Annotated[str | None, _option("Retry backoff base, seconds")] = None,
    backoff_cap: Annotated[str | None, _option("Retry backoff cap, seconds")] = None,
    backoff_jitter: Annotated[str | None, _option("Retry backoff jitter, 0 to 0.99")] = None,
    retain_succeeded: Annotated[
        str | None, _option("Keep succeeded jobs this many seconds")
    ] = None,
    retain_failed: Annotated[str | None, _option("Keep failed jobs this many seconds")] = None,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Show a queue's settings, or change those given (the others stay)."""
    given = {
        "max_backlog": max_backlog,
        "max_running": max_running,
        "max_running_per_key": max_running_per_key,
        "rate_limit": rate_limit,
        "max_attempts": max_attempts,
        "lease_seconds": lease_seconds,
        "backoff_base": backoff_base,
        "backoff_cap": backoff_cap,
        "backoff_jitter": backoff_jitter,
        "retain_succeeded": retain_succeeded,
        "retain_failed": retain_failed,
    }
    body = {}
    for option, value in given.items():
        if value is not None:
            field, read = _SETTINGS[option]
            body[field] = read(value)
    service = Service.find(url, api_key)
    path = f"/v1/queues/{queue}/settings"
    answer = service.call("PUT", path, body=body) if body else service.call("GET", path)
    if wants_json(output, as_json):
        print_json(answer)
        return
    rows = table(f"settings of {queue}", [("setting", "key"), ("value", "text")])
    rows.show_header = False
    for name, value in answer.items():
        if name != "queue":
            rows.add_row(name, _shown(name, value))
    console().print(rows)
