"""`jobq workers …`: list the workers seen lately, quiet one, resume it."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli._output import command_group, console, narrow, print_json, table, when
from app.cli._service import Operator, Session
from jobq_client import WorkerInfo

workers_cli = command_group("List workers, idle or busy; quiet one, or resume it.")
IdArgument = Annotated[str, typer.Argument(help="The worker's id, as listed.")]


def _state(worker: WorkerInfo) -> str:
    return f"{worker.status}, quiet" if worker.quiet else worker.status


def _sdk(worker: WorkerInfo) -> str:
    if worker.sdk is None:
        return "-"
    return worker.sdk if worker.version is None else f"{worker.sdk} {worker.version}"


@workers_cli.command("list", cls=Operator)
def list_workers(ctx: typer.Context) -> None:
    """Workers seen lately, idle or busy, live or gone, with their jobs.

    A worker unseen for JOBQ_WORKER_GONE_SECONDS is gone; it is listed until
    JOBQ_WORKER_RETAIN_SECONDS.
    """
    session = Session.of(ctx)
    workers = session.jobq.list_workers()  # every page
    if session.as_json:
        print_json([w for page in session.answers for w in page["workers"]])
        return
    out = console()
    compact = narrow(out)
    rows = table(
        None,
        [("worker", "key"), ("state", "text"), ("sdk", "text"), ("host", "text"),
         ("queues", "text"), ("running", "number"), ("per min", "number"),
         ("last seen", "text")],
    )  # fmt: skip
    for w in workers:
        rows.add_row(
            w.worker_id,
            _state(w),
            _sdk(w),
            w.host or "-",
            ", ".join(w.queues) or "-",
            str(w.running),
            f"{w.finished_per_minute:.1f}",
            when(w.last_seen, compact=compact),
        )
    out.print(rows if workers else "no worker seen lately")


def _switched(session: Session, worker_id: str, quiet: bool) -> None:
    if session.as_json:
        print_json(session.answer)
    elif quiet:
        typer.echo(f"worker {worker_id}: quiet (it finishes its jobs, then leases no more)")
    else:
        typer.echo(f"worker {worker_id}: leasing again")


@workers_cli.command("quiet", cls=Operator)
def quiet(ctx: typer.Context, worker_id: IdArgument) -> None:
    """Ask a worker to lease no more; it finishes the jobs it holds.

    The SDK workers obey at their next call, then idle until resumed.
    """
    session = Session.of(ctx)
    _switched(session, worker_id, session.jobq.quiet_worker(worker_id))


@workers_cli.command("resume", cls=Operator)
def resume(ctx: typer.Context, worker_id: IdArgument) -> None:
    """Let a quiet worker lease again."""
    session = Session.of(ctx)
    _switched(session, worker_id, session.jobq.resume_worker(worker_id))
