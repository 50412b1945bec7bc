"""`jobq jobs …`: list and show jobs; cancel, retry or delete one."""

from __future__ import annotations

import enum
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
    progress,
    table,
    wants_json,
    when,
)

jobs_cli = command_group("List and show jobs; cancel, retry or delete one.")

JobIdArgument = Annotated[int, typer.Argument(min=1, help="The job's id.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


class State(enum.StrEnum):
    """The API's job states (`app.jobs.JobState`; a test holds the two equal)."""

    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


def _traceback(error: dict[str, Any] | None) -> str | None:
    """The traceback a worker sent with an error (the Python SDK's `details.traceback`)."""
    details = (error or {}).get("details")
    trace = details.get("traceback") if isinstance(details, dict) else None
    return trace.rstrip("\n") if isinstance(trace, str) and trace.strip() else None


def _state(job: dict[str, Any]) -> str:
    return str(job["state"]) + (" (cancel requested)" if job["cancel_requested"] else "")


@jobs_cli.command("list")
def list_jobs(
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    state: Annotated[State | None, typer.Option(help="Only this state.")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 50,
    after: Annotated[int, typer.Option(min=0, help="Start after this id.")] = 0,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """List jobs by id, a page at a time."""
    params = {"queue": queue, "state": state, "type": type_, "limit": limit, "after": after}
    page = Service.find(url, api_key).call("GET", "/v1/jobs", params=params)
    if wants_json(output, as_json):
        print_json(page)
        return
    out = console()
    compact = narrow(out)
    rows = table(
        None,
        [("id", "number"), ("queue", "key"), ("type", "key"), ("state", "key"),
         ("attempt", "number"), ("due" if compact else "run at", "number"),
         ("last error", "text")],
    )  # fmt: skip
    for job in page["jobs"]:
        error = job["last_error"] or {}
        rows.add_row(
            str(job["id"]),
            job["queue"],
            job["type"],
            _state(job),
            f"{job['attempt']}/{job['max_attempts']}",
            when(job["run_at"], compact=compact),
            error.get("type") or "-",
        )
    out.print(rows)
    if page["next_after"] is not None:
        out.print(f"more: --after {page['next_after']}", markup=False)


@jobs_cli.command("show")
def show_job(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """One job: state, times, progress, last error and attempts.

    The last error's traceback, if any, follows; --output json adds the payload.
    """
    job = Service.find(url, api_key).call("GET", f"/v1/jobs/{job_id}")
    if wants_json(output, as_json):
        print_json(job)
        return
    out = console()
    compact = narrow(out)
    error = job["last_error"]
    fields = {
        "queue / type": f"{job['queue']} / {job['type']}",
        "state": _state(job),
        "attempt": f"{job['attempt']} of {job['max_attempts']}",
        "priority": str(job["priority"]),
        "run at": when(job["run_at"], compact=False),
        "created": when(job["created_at"], compact=False),
        "started": when(job["started_at"], compact=False),
        "finished": when(job["finished_at"], compact=False),
        "worker": job["worker_id"] or "-",
        "lease expires": when(job["lease_expires_at"], compact=False),
        "progress": progress(job["progress"]),
        "last error": "-" if error is None else f"{error['type']}: {error.get('message') or ''}",
        "idempotency key": job["idempotency_key"] or "-",
    }
    details = table(f"job {job['id']}", [("field", "key"), ("value", "text")])
    details.show_header = False
    for name, value in fields.items():
        details.add_row(name, value)
    out.print(details)
    trace = _traceback(error)
    if trace:
        out.print()
        out.print("traceback of the last error", style="table.title")
        out.print(trace, markup=False, highlight=False)
    if job["attempts"]:
        out.print()
        attempts = table(
            "attempts",
            [("#", "number"), ("worker", "key"), ("started", "number"),
             ("finished", "number"), ("outcome", "key"), ("error", "text")],
        )  # fmt: skip
        for a in job["attempts"]:
            attempts.add_row(
                str(a["attempt"]),
                a["worker_id"] or "-",
                when(a["started_at"], compact=compact),
                when(a["finished_at"], compact=compact),
                a["outcome"],
                (a["error"] or {}).get("type") or "-",
            )
        out.print(attempts)


def job_line(job: dict[str, Any]) -> str:
    """What an action left the job as, in one line."""
    if job["state"] == "running" and job.get("cancel_requested"):
        return (
            f"job {job['id']}: running; cancellation requested "
            "(its worker sees it on its next heartbeat)"
        )
    if job["state"] == "queued":
        used = f"{job['attempt']} of {job['max_attempts']} attempts used"
        return f"job {job['id']}: queued, due {job['run_at']} ({used})"
    return f"job {job['id']}: {job['state']}"


@jobs_cli.command("cancel")
def cancel_job(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Cancel a job: a queued one at once, a running one by its worker."""
    job = Service.find(url, api_key).call("POST", f"/v1/jobs/{job_id}/cancel", body={})
    if wants_json(output, as_json):
        print_json(job)
    else:
        typer.echo(job_line(job))


@jobs_cli.command("retry")
def retry_job(
    job_id: JobIdArgument,
    reset_attempts: Annotated[
        bool, typer.Option("--reset-attempts", help="Give it all its attempts again.")
    ] = False,
    run_at: Annotated[
        str | None, typer.Option(help="Not before this time (RFC 3339, with a time zone).")
    ] = None,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Put a failed or cancelled job back in its queue."""
    body: dict[str, Any] = {"reset_attempts": reset_attempts}
    if run_at is not None:
        body["run_at"] = run_at
    job = Service.find(url, api_key).call("POST", f"/v1/jobs/{job_id}/retry", body=body)
    if wants_json(output, as_json):
        print_json(job)
    else:
        typer.echo(job_line(job))


@jobs_cli.command("delete")
def delete_job(
    job_id: JobIdArgument,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
    output: OutputOption = Output.TABLE,
    as_json: JsonFlag = False,
) -> None:
    """Delete a job that is not running (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete job {job_id} for good?", abort=True, err=True)
    Service.find(url, api_key).call("DELETE", f"/v1/jobs/{job_id}")
    if wants_json(output, as_json):
        print_json({"id": job_id, "deleted": True})
    else:
        typer.echo(f"job {job_id}: deleted")
