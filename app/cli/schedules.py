"""`jobq schedules …`: list, show, set, delete, pause and resume cron schedules."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from app.cli._http import KeyOption, Service, UrlOption
from app.cli._output import (
    JsonFlag,
    Output,
    OutputOption,
    command_group,
    console,
    narrow,
    print_json,
    table,
    wants_json,
    when,
)
from app.cli.jobs import YesOption

schedules_cli = command_group("List, show, set, delete, pause and resume cron schedules.")
NameArgument = Annotated[str, typer.Argument(help="The schedule's name.")]


def _path(name: str) -> str:
    return f"/v1/schedules/{name}"


def _json_value(option: str) -> Any:
    def parse(value: str | None) -> Any:
        if value is None:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON ({exc.msg})", param_hint=option) from None

    return parse


def _state(schedule: dict[str, Any]) -> str:
    return "paused" if schedule["paused"] else "active"


@schedules_cli.command("list")
def list_schedules(
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Every schedule: its cron, queue and type, and when it runs next."""
    service = Service.find(url, api_key)
    answer: dict[str, Any] = {"schedules": [], "next_after": ""}
    while answer["next_after"] is not None:  # every page
        page = service.call("GET", "/v1/schedules", params={"after": answer["next_after"]})
        answer = {**page, "schedules": answer["schedules"] + page["schedules"]}
    if wants_json(output, as_json):
        print_json(answer["schedules"])
        return
    out = console()
    rows = table(
        None,
        [("name", "key"), ("cron", "key"), ("queue", "text"), ("type", "text"),
         ("state", "text"), ("next run", "text")],
    )  # fmt: skip
    for s in answer["schedules"]:
        zone = "" if s["timezone"] == "UTC" else f" {s['timezone']}"
        next_run = s["next_runs"][0] if s["next_runs"] else None
        rows.add_row(
            s["name"],
            s["cron"] + zone,
            s["queue"],
            s["type"],
            _state(s),
            when(next_run, compact=narrow(out)),
        )
    out.print(rows if answer["schedules"] else "no schedules yet")


def _show(schedule: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(schedule)
        return
    out = console()
    compact = narrow(out)
    about = table(f"schedule {schedule['name']}", [("", "key"), ("", "text")])
    about.show_header = False
    lines = [
        ("cron", f"{schedule['cron']} ({schedule['timezone']})"),
        ("enqueues", f"{schedule['type']} on queue {schedule['queue']}"),
        ("state", _state(schedule)),
        ("catch up", f"{schedule['catch_up']} (limit {schedule['catch_up_limit']})"),
        ("last tick", when(schedule["last_tick"], compact=compact)),
        ("payload", json.dumps(schedule["payload"])),
    ]
    for label, value in lines:
        about.add_row(label, value)
    out.print(about)
    if schedule["next_runs"]:
        out.print("next runs: " + ", ".join(when(t, compact=False) for t in schedule["next_runs"]))
    runs = table("last jobs made", [("tick", "key"), ("job", "number"), ("state", "text")])
    for run in schedule["recent_runs"]:
        job = "-" if run["job_id"] is None else str(run["job_id"])
        state = run["refused"] or run["job_state"] or "deleted"
        runs.add_row(when(run["tick"], compact=False), job, state)
    out.print(runs if schedule["recent_runs"] else "no jobs made yet")


@schedules_cli.command("show")
def show(
    name: NameArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """One schedule: its next ticks and the last jobs it made."""
    answer = Service.find(url, api_key).call("GET", _path(name))
    _show(answer, wants_json(output, as_json))


@schedules_cli.command("set")
def set_schedule(
    name: NameArgument,
    cron: Annotated[
        str, typer.Option(help="5 fields (min hour day month weekday) or @hourly, @daily…")
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
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Create or replace a schedule."""
    body: dict[str, Any] = {
        "queue": queue,
        "type": type_,
        "payload": payload,
        "cron": cron,
        "timezone": timezone,
        "priority": priority,
        "max_attempts": max_attempts,
        "lease_seconds": lease_seconds,
        "catch_up": catch_up,
        "catch_up_limit": catch_up_limit,
        "paused": paused,
    }
    answer = Service.find(url, api_key).call("PUT", _path(name), body=body)
    _show(answer, wants_json(output, as_json))


@schedules_cli.command("delete")
def delete(
    name: NameArgument,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Delete a schedule; the jobs it made stay (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete schedule {name!r}?", abort=True, err=True)
    Service.find(url, api_key).call("DELETE", _path(name))
    typer.echo(f"schedule {name}: deleted")


def _switch(name: str, action: str, url: str | None, api_key: str | None, as_json: bool) -> None:
    answer = Service.find(url, api_key).call("POST", f"{_path(name)}/{action}", body={})
    if as_json:
        print_json(answer)
    else:
        typer.echo(f"schedule {name}: {_state(answer)}")


@schedules_cli.command("pause")
def pause(
    name: NameArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Pause a schedule: no ticks are enqueued until it resumes."""
    _switch(name, "pause", url, api_key, wants_json(output, as_json))


@schedules_cli.command("resume")
def resume(
    name: NameArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Resume a paused schedule from its next tick.

    The ticks missed while it was paused are not made.
    """
    _switch(name, "resume", url, api_key, wants_json(output, as_json))
