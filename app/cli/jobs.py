"""`jobq jobs …`: list, show and explain jobs; cancel, retry or delete one."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated

import typer

from app.cli._output import (
    command_group,
    console,
    narrow,
    print_json,
    progress,
    table,
    when,
)
from app.cli._service import Operator, Session
from jobq_client import ErrorInfo, JobRecord

jobs_cli = command_group("List, show and explain jobs; cancel, retry or delete one.")

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


def _traceback(error: ErrorInfo | None) -> str | None:
    """The traceback a worker sent with an error (the Python SDK's `details.traceback`)."""
    details = error.details if error is not None else None
    trace = details.get("traceback") if isinstance(details, dict) else None
    return trace.rstrip("\n") if isinstance(trace, str) and trace.strip() else None


def _unique(job: JobRecord) -> str:
    """Its uniqueness in one line: key, period (and its start), states."""
    unique = job.unique
    if unique is None:
        return "-"
    period = f", one per {unique.period} s from {when(unique.since, compact=False)}"
    return f"{unique.key}{period if unique.period else ''}, while {' / '.join(unique.states)}"


def _state(job: JobRecord) -> str:
    return job.state + (" (cancel requested)" if job.cancel_requested else "")


def rfc3339(value: str) -> datetime:
    """A time as RFC 3339 writes it (`Z` or an offset; a time without one is the
    service's to refuse, as it refuses it from any client)."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter("not an RFC 3339 time, e.g. 2030-01-01T09:00:00Z") from None


@jobs_cli.command("list", cls=Operator)
def list_jobs(
    ctx: typer.Context,
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    state: Annotated[State | None, typer.Option(help="Only this state.")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 50,
    after: Annotated[int, typer.Option(min=0, help="Start after this id.")] = 0,
) -> None:
    """List jobs by id, a page at a time."""
    session = Session.of(ctx)
    page = session.jobq.list_jobs(
        queue=queue,
        state=state.value if state else None,
        type=type_,
        limit=limit,
        after=after,
    )
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    compact = narrow(out)
    rows = table(
        None,
        [("id", "number"), ("queue", "key"), ("type", "key"), ("state", "key"),
         ("attempt", "number"), ("due" if compact else "run at", "number"),
         ("last error", "text")],
    )  # fmt: skip
    for job in page.jobs:
        rows.add_row(
            str(job.id),
            job.queue,
            job.type,
            _state(job),
            f"{job.attempt}/{job.max_attempts}",
            when(job.run_at, compact=compact),
            job.last_error.type if job.last_error else "-",
        )
    out.print(rows)
    if page.next_after is not None:
        out.print(f"more: --after {page.next_after}", markup=False)


@jobs_cli.command("show", cls=Operator)
def show_job(ctx: typer.Context, job_id: JobIdArgument) -> None:
    """One job: state, times, progress, last error and attempts.

    The last error's traceback, if any, follows; --output json adds the payload.
    """
    session = Session.of(ctx)
    job = session.jobq.get_job(job_id)
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    compact = narrow(out)
    error = job.last_error
    fields = {
        "queue / type": f"{job.queue} / {job.type}",
        "state": _state(job),
        "attempt": f"{job.attempt} of {job.max_attempts}",
        "priority": str(job.priority),
        "run at": when(job.run_at, compact=False),
        "created": when(job.created_at, compact=False),
        "started": when(job.started_at, compact=False),
        "finished": when(job.finished_at, compact=False),
        "worker": job.worker_id or "-",
        "lease expires": when(job.lease_expires_at, compact=False),
        "timeout": "-" if job.timeout_seconds is None else f"{job.timeout_seconds} s an attempt",
        "start by": when(job.start_by, compact=False),
        "snoozes": str(job.snoozes),
        "progress": progress(job.progress),
        "last error": "-" if error is None else f"{error.type}: {error.message}",
        "idempotency key": job.idempotency_key or "-",
        "unique": _unique(job),
        # the trace id to look the job's trace up in a tracing backend
        "trace id": "-" if job.trace is None else job.trace.traceparent.split("-")[1],
    }
    details = table(f"job {job.id}", [("field", "key"), ("value", "text")])
    details.show_header = False
    for name, value in fields.items():
        details.add_row(name, value)
    out.print(details)
    trace = _traceback(error)
    if trace:
        out.print()
        out.print("traceback of the last error", style="table.title")
        out.print(trace, markup=False, highlight=False)
    if job.attempts:
        out.print()
        attempts = table(
            "attempts",
            [("#", "number"), ("worker", "key"), ("started", "number"),
             ("finished", "number"), ("outcome", "key"), ("error", "text")],
        )  # fmt: skip
        for a in job.attempts:
            attempts.add_row(
                str(a.attempt),
                a.worker_id or "-",
                when(a.started_at, compact=compact),
                when(a.finished_at, compact=compact),
                a.outcome,
                a.error.type if a.error else "-",
            )
        out.print(attempts)


@jobs_cli.command("explain", cls=Operator)
def explain_job(ctx: typer.Context, job_id: JobIdArgument) -> None:
    """Why a job is not running now, or how it ended.

    Every reason that holds is listed; a blocking reason alone keeps the next
    lease of its queue from taking the job.
    """
    session = Session.of(ctx)
    found = session.jobq.explain_job(job_id)
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    verdict = "leasable: the next lease takes it" if found.leasable else "not leasable now"
    out.print(f"job {found.job_id} ({found.queue} / {found.type}): {found.state}, {verdict}",
              markup=False)  # fmt: skip
    if not found.reasons:
        return
    rows = table(None, [("reason", "key"), ("blocks", "key"), ("detail", "text")])
    for reason in found.reasons:
        detail = reason.message
        if reason.until is not None:
            detail += f" (until {when(reason.until, compact=False)})"
        if reason.parents:
            detail += ": " + ", ".join(f"{p.id} {p.state}" for p in reason.parents)
        rows.add_row(reason.code, "yes" if reason.blocking else "no", detail)
    out.print(rows)


def job_line(session: Session, job: JobRecord) -> None:
    """What an action left the job as: its JSON, or one line."""
    if session.as_json:
        print_json(session.answer)
    elif job.state == "running" and job.cancel_requested:
        typer.echo(
            f"job {job.id}: running; cancellation requested "
            "(its worker sees it on its next heartbeat)"
        )
    elif job.state == "queued":
        used = f"{job.attempt} of {job.max_attempts} attempts used"
        typer.echo(f"job {job.id}: queued, due {when(job.run_at, compact=False)} ({used})")
    else:
        typer.echo(f"job {job.id}: {job.state}")


@jobs_cli.command("cancel", cls=Operator)
def cancel_job(ctx: typer.Context, job_id: JobIdArgument) -> None:
    """Cancel a job: a queued one at once, a running one by its worker."""
    session = Session.of(ctx)
    job_line(session, session.jobq.cancel_job(job_id))


@jobs_cli.command("retry", cls=Operator)
def retry_job(
    ctx: typer.Context,
    job_id: JobIdArgument,
    reset_attempts: Annotated[
        bool, typer.Option("--reset-attempts", help="Give it all its attempts again.")
    ] = False,
    run_at: Annotated[
        datetime | None,
        typer.Option(
            help="Not before this time (RFC 3339, with a time zone).",
            parser=rfc3339,
        ),
    ] = None,
) -> None:
    """Put a failed or cancelled job back in its queue."""
    session = Session.of(ctx)
    job = session.jobq.retry_job(job_id, run_at, reset_attempts=reset_attempts)
    job_line(session, job)


@jobs_cli.command("delete", cls=Operator)
def delete_job(ctx: typer.Context, job_id: JobIdArgument, yes: YesOption = False) -> None:
    """Delete a job that is not running (asks first, unless --yes)."""
    if not yes:
        typer.confirm(f"Delete job {job_id} for good?", abort=True, err=True)
    session = Session.of(ctx)
    session.jobq.delete_job(job_id)
    if session.as_json:
        print_json({"id": job_id, "deleted": True})
    else:
        typer.echo(f"job {job_id}: deleted")
