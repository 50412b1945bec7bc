"""`jobq schedules …`: list, show, set, delete, pause and resume cron schedules."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

import typer

from app.cli._output import command_group, console, narrow, print_json, table, when
from app.cli._service import Connected, Operator, Session
from app.cli.jobs import YesOption
from jobq_client import Schedule

schedules_cli = command_group("List, show, set, delete, pause and resume cron schedules.")
NameArgument = Annotated[str, typer.Argument(help="The schedule's name.")]


def _json_value(option: str) -> Any:
    def parse(value: str | None) -> Any:
        if value is None:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON ({exc.msg})", param_hint=option) from None

    return parse


def _state(schedule: Schedule) -> str:
    return "paused" if schedule.paused else "active"


@schedules_cli.command("list", cls=Operator)
def list_schedules(ctx: typer.Context) -> None:
    """Every schedule: its cron, queue and type, and when it runs next."""
    session = Session.of(ctx)
    schedules = session.jobq.list_schedules()  # every page
    if session.as_json:
        print_json([s for page in session.answers for s in page["schedules"]])
        return
    out = console()
    rows = table(
        None,
        [("name", "key"), ("cron", "key"), ("queue", "text"), ("type", "text"),
         ("state", "text"), ("next run", "text")],
    )  # fmt: skip
    for s in schedules:
        zone = "" if s.timezone == "UTC" else f" {s.timezone}"
        next_run = s.next_runs[0] if s.next_runs else None
        rows.add_row(
            s.name,
            s.cron + zone,
            s.queue,
            s.type,
            _state(s),
            when(next_run, compact=narrow(out)),
        )
    out.print(rows if schedules else "no schedules yet")


def _show(session: Session, schedule: Schedule) -> None:
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    compact = narrow(out)
    about = table(f"schedule {schedule.name}", [("", "key"), ("", "text")])
    about.show_header = False
    lines = [
        ("cron", f"{schedule.cron} ({schedule.timezone})"),
        ("enqueues", f"{schedule.type} on queue {schedule.queue}"),
        ("state", _state(schedule)),
        ("catch up", f"{schedule.catch_up} (limit {schedule.catch_up_limit})"),
        ("last tick", when(schedule.last_tick, compact=compact)),
        ("payload", json.dumps(schedule.payload)),
    ]
    for label, value in lines:
        about.add_row(label, value)
    out.print(about)
    if schedule.next_runs:
        out.print("next runs: " + ", ".join(when(t, compact=False) for t in schedule.next_runs))
    runs = table("last jobs made", [("tick", "key"), ("job", "number"), ("state", "text")])
    for run in schedule.recent_runs:
        job = "-" if run.job_id is None else str(run.job_id)
        state = run.refused or run.job_state or "deleted"
        runs.add_row(when(run.tick, compact=False), job, state)
    out.print(runs if schedule.recent_runs else "no jobs made yet")


@schedules_cli.command("show", cls=Operator)
def show(ctx: typer.Context, name: NameArgument) -> None:
    """One schedule: its next ticks and the last jobs it made."""
    session = Session.of(ctx)
    _show(session, session.jobq.get_schedule(name))


CatchUp = Literal["latest", "none", "all"]  # the service refuses any other (422)


@schedules_cli.command("set", cls=Operator)
def set_schedule(
    ctx: typer.Context,
    name: NameArgument,
    cron: Annotated[
        str,
        typer.Option(
            help="5 fields (min hour day month weekday), 6 with the second first, "
            "@every 10s (1 s at least), or @hourly, @daily…"
        ),
    ],
    queue: Annotated[str, typer.Option(help="The queue its jobs go to.")],
    type_: Annotated[str, typer.Option("--type", help="The jobs' type.")],
    payload: Annotated[
        str | None,
        typer.Option(help="The jobs' payload, as JSON.", callback=_json_value("--payload")),
    ] = None,
    timezone: Annotated[str, typer.Option(help="An IANA time zone.")] = "UTC",
    priority: Annotated[int, typer.Option(help="The jobs' priority.")] = 0,
    max_attempts: Annotated[
        int | None, typer.Option(min=1, help="The jobs' attempts (default: the service's).")
    ] = None,
    lease_seconds: Annotated[
        int | None, typer.Option(min=1, help="The jobs' lease (default: the service's).")
    ] = None,
    catch_up: Annotated[
        str, typer.Option(help="After downtime: latest, none or all missed ticks.")
    ] = "latest",
    catch_up_limit: Annotated[
        int, typer.Option(min=1, help="With --catch-up all: at most this many.")
    ] = 100,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
) -> None:
    """Create or replace a schedule."""
    session = Session.of(ctx)
    made = session.jobq.set_schedule(
        name, queue=queue, type=type_, cron=cron, payload=payload, timezone=timezone,
        priority=priority, max_attempts=max_attempts, lease_seconds=lease_seconds,
        paused=paused, catch_up=cast(CatchUp, catch_up), catch_up_limit=catch_up_limit,
    )  # fmt: skip
    _show(session, made)


@schedules_cli.command("delete", cls=Connected)
def delete(ctx: typer.Context, name: NameArgument, yes: YesOption = False) -> None:
    """Delete a schedule; the jobs it made stay (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete schedule {name!r}?", abort=True, err=True)
    Session.of(ctx).jobq.delete_schedule(name)
    typer.echo(f"schedule {name}: deleted")


def _switched(session: Session, schedule: Schedule) -> None:
    if session.as_json:
        print_json(session.answer)
    else:
        typer.echo(f"schedule {schedule.name}: {_state(schedule)}")


@schedules_cli.command("pause", cls=Operator)
def pause(ctx: typer.Context, name: NameArgument) -> None:
    """Pause a schedule: no ticks are enqueued until it resumes."""
    session = Session.of(ctx)
    _switched(session, session.jobq.pause_schedule(name))


@schedules_cli.command("resume", cls=Operator)
def resume(ctx: typer.Context, name: NameArgument) -> None:
    """Resume a paused schedule from its next tick.

    The ticks missed while it was paused are not made.
    """
    session = Session.of(ctx)
    _switched(session, session.jobq.resume_schedule(name))
