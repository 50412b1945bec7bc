"""`jobq queues …`: list and show queues; pause, resume, purge, redrive; their settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer

from app.cli._output import command_group, console, count, print_json, seconds, table
from app.cli._service import Operator, Session
from app.cli.jobs import YesOption, rfc3339
from app.cli.push import Pull, PushHeader, PushSecret, PushTimeout, PushUrl, push_change
from app.cli.push import shown as push_shown
from app.cli.stats import show_queue
from jobq_client import Aging, PushTargetInfo, QueueSettings, RateLimit

T = TypeVar("T")

queues_cli = command_group("Queues: list, show, pause, resume, purge, redrive, settings.")
QueueArgument = Annotated[str, typer.Argument(help="The queue's name.")]


def _say(session: Session, line: str) -> None:
    """The answer's JSON, or one line for people."""
    if session.as_json:
        print_json(session.answer)
    else:
        typer.echo(line)


@queues_cli.command("list", cls=Operator)
def list_queues(ctx: typer.Context) -> None:
    """Every known queue: paused or not, and its jobs by state."""
    session = Session.of(ctx)
    queues = session.jobq.list_queues()
    if session.as_json:
        print_json(session.answer["queues"])
        return
    rows = table(
        None,
        [("queue", "key"), ("state", "key"), ("queued", "number"), ("running", "number"),
         ("failed", "number"), ("oldest due", "number")],
    )  # fmt: skip
    for q in queues:
        c = q.counts
        rows.add_row(
            q.queue,
            "paused" if q.paused else "active",
            count(c["queued"]),
            count(c["running"]),
            count(c["failed"]),
            seconds(q.oldest_due_age_seconds),
        )
    console().print(rows if queues else "no queues yet")


@queues_cli.command("show", cls=Operator)
def show(ctx: typer.Context, queue: QueueArgument) -> None:
    """One queue's figures and its longest-running jobs.

    The same as `jobq stats QUEUE`.
    """
    show_queue(Session.of(ctx), queue)


def _state_line(session: Session) -> str:
    answer = session.answer  # pausing answers the queue's state, which the SDK drops
    if answer.get("paused"):
        return f"queue {answer['queue']}: paused since {answer.get('paused_at')}"
    return f"queue {answer['queue']}: active"


@queues_cli.command("pause", cls=Operator)
def pause(ctx: typer.Context, queue: QueueArgument) -> None:
    """Pause a queue: leasing skips it, enqueueing still works."""
    session = Session.of(ctx)
    session.jobq.pause_queue(queue)
    _say(session, _state_line(session))


@queues_cli.command("resume", cls=Operator)
def resume(ctx: typer.Context, queue: QueueArgument) -> None:
    """Resume a paused queue."""
    session = Session.of(ctx)
    session.jobq.resume_queue(queue)
    _say(session, _state_line(session))


@queues_cli.command("purge", cls=Operator)
def purge(ctx: typer.Context, queue: QueueArgument, yes: YesOption = False) -> None:
    """Delete every queued job of a queue (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete every queued job of queue {queue!r}?", abort=True, err=True)
    session = Session.of(ctx)
    deleted = session.jobq.purge_queue(queue)
    _say(session, f"queue {queue}: {deleted} jobs deleted")


@queues_cli.command("redrive", cls=Operator)
def redrive(
    ctx: typer.Context,
    queue: QueueArgument,
    type_: Annotated[str | None, typer.Option("--type", help="Only jobs of this type.")] = None,
    error_type: Annotated[
        str | None, typer.Option(help="Only jobs whose last error has this type.")
    ] = None,
    failed_since: Annotated[
        datetime | None,
        typer.Option(help="Only jobs that failed since (RFC 3339).", parser=rfc3339),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 1000,
    reset_attempts: Annotated[
        bool, typer.Option("--reset-attempts", help="Give them all their attempts again.")
    ] = False,
    yes: YesOption = False,
) -> None:
    """Send a queue's failed jobs back to it, oldest failure first.

    Asks first, unless --yes.
    """
    if not yes:
        typer.confirm(f"Run failed jobs of queue {queue!r} again?", abort=True, err=True)
    session = Session.of(ctx)
    retried = session.jobq.redrive_failed(
        queue,
        type=type_,
        error_type=error_type,
        failed_since=failed_since,
        limit=limit,
        reset_attempts=reset_attempts,
    )
    _say(session, f"queue {queue}: {retried} failed jobs queued again")


def _none(value: str) -> bool:
    return value.lower() in ("none", "null", "unlimited", "default")


def _or_none(convert: Callable[[str], T], what: str) -> Callable[[str], T | None]:
    """A reader of `what` (`convert` reads it), or of None for 'none'."""

    def read(value: str) -> T | None:
        if _none(value):
            return None
        try:
            return convert(value)
        except ValueError:
            raise typer.BadParameter(f"{what}, or 'none'") from None

    return read


_whole = _or_none(int, "a whole number")
_number = _or_none(float, "a number")


def _rate(value: str) -> RateLimit | None:
    """'100/60' (100 jobs per 60 seconds), or None for 'none'."""
    if _none(value):
        return None
    jobs, _, per = value.partition("/")
    try:
        return RateLimit(int(jobs), float(per.removesuffix("s")))
    except ValueError:
        raise typer.BadParameter("JOBS/SECONDS, such as 100/60, or 'none'") from None


def _ordering(value: str) -> str | None:
    """'fifo' or 'fair', or None for 'none' (fifo)."""
    if _none(value):
        return None
    if value not in ("fifo", "fair"):
        raise typer.BadParameter("fifo or fair, or 'none'")
    return value


def _weights(value: str) -> dict[str, float] | None:
    """'gold=3,silver=2' (fairness key = weight), or None for 'none'."""
    if _none(value):
        return None
    try:
        pairs = (item.rpartition("=") for item in value.split(","))
        return {key: float(weight) for key, eq, weight in pairs if eq and key}
    except ValueError:
        raise typer.BadParameter("KEY=WEIGHT,..., such as gold=3,silver=2, or 'none'") from None


def _aging(value: str) -> Aging | None:
    """'30/10' (+1 priority per 30 seconds waited, at most +10), or None for 'none'."""
    if _none(value):
        return None
    per, _, most = value.partition("/")
    try:
        return Aging(float(per.removesuffix("s")), int(most))
    except ValueError:
        raise typer.BadParameter("SECONDS/MAX, such as 30/10, or 'none'") from None


def _option(help_text: str) -> Any:
    return typer.Option(help=f"{help_text}; 'none' clears it.", show_default=False)


# option name → (the setting, how to read the value)
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
    "ordering": ("ordering", _ordering),
    "weights": ("fair_weights", _weights),
    "rate_limit_per_key": ("rate_limit_per_key", _rate),
    "aging": ("aging", _aging),
    "timeout": ("timeout_seconds", _whole),
}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, RateLimit):
        return f"{value.jobs} per {value.per_seconds:g}s"
    if isinstance(value, Aging):
        return f"+1 per {value.per_seconds:g}s, at most +{value.max_boost}"
    if isinstance(value, dict):
        return ", ".join(f"{key}={weight:g}" for key, weight in value.items())
    if isinstance(value, PushTargetInfo):
        return push_shown(value)
    return str(value)


@queues_cli.command("settings", cls=Operator)
def settings(
    ctx: typer.Context,
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
    ordering: Annotated[
        str | None, _option("fifo, or fair: take turns across fairness keys")
    ] = None,
    weights: Annotated[str | None, _option("A fair queue's shares, as KEY=WEIGHT,...")] = None,
    rate_limit_per_key: Annotated[
        str | None, _option("At most JOBS leases per fairness key per SECONDS")
    ] = None,
    aging: Annotated[
        str | None, _option("+1 priority per SECONDS waited, at most MAX: SECONDS/MAX")
    ] = None,
    push_url: PushUrl = None,
    push_secret: PushSecret = None,
    push_header: PushHeader = None,
    push_timeout: PushTimeout = None,
    pull: Pull = False,
    timeout: Annotated[str | None, _option("Default execution timeout of its jobs, s")] = None,
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
        "ordering": ordering,
        "weights": weights,
        "rate_limit_per_key": rate_limit_per_key,
        "aging": aging,
        "timeout": timeout,
    }
    changes = {}
    for option, value in given.items():
        if value is not None:
            name, read = _SETTINGS[option]
            changes[name] = read(value)
    changes.update(push_change(push_url, push_secret, push_header, push_timeout, pull))
    session = Session.of(ctx)
    if changes:
        current = session.jobq.set_queue_settings(queue, **changes)
    else:
        current = session.jobq.get_queue_settings(queue)
    if session.as_json:
        print_json(session.answer)
        return
    rows = table(f"settings of {queue}", [("setting", "key"), ("value", "text")])
    rows.show_header = False
    for setting in fields(QueueSettings):
        if setting.name != "queue":
            rows.add_row(setting.name, _shown(getattr(current, setting.name)))
    console().print(rows)
