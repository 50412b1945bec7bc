"""Operator commands against a running jobq: `jobq stats`, `jobq jobs …`, `jobq queues …`.

They talk HTTP to the service at `--url` (`JOBQ_URL`, default http://127.0.0.1:8000) and
send `Authorization: Bearer <key>` when `--api-key` (`JOBQ_API_KEY`) is given. A service
that cannot be reached, or an error answer, ends the command with exit status 1 and one
line on stderr (a problem's title and detail), never a traceback. `--json` prints the
service's answer as it came, for scripts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import httpx
import typer
from rich.console import Console
from rich.table import Table

DEFAULT_URL = "http://127.0.0.1:8000"
PIPED_WIDTH = 200
TIMEOUT_SECONDS = 35.0  # above the longest request the API serves (a 30 s long poll)

UrlOption = Annotated[
    str, typer.Option("--url", envvar="JOBQ_URL", help="The jobq service.", show_envvar=True)
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key", envvar="JOBQ_API_KEY", help="Sent as a Bearer token.", show_default=False
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the service's JSON answer.")]
JobIdArgument = Annotated[int, typer.Argument(min=1, help="The job's id.")]
QueueArgument = Annotated[str, typer.Argument(help="The queue's name.")]

jobs_cli = typer.Typer(help="Look at jobs; cancel or retry one.", no_args_is_help=True)
queues_cli = typer.Typer(help="Pause or resume a queue.", no_args_is_help=True)


def make_client(url: str, api_key: str | None) -> httpx.Client:
    """The HTTP client every command uses (tests may swap it)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_SECONDS)


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 1."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"jobq: {message}", markup=False)
    raise typer.Exit(1)


def problem_message(response: httpx.Response) -> str:
    """An error answer in one line: a problem's title and detail, else the status and text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "title" in body:
        code = f" [{body['code']}]" if body.get("code") else ""
        detail = body.get("detail") or ""
        return f"{body['title']} ({response.status_code}){code}: {detail}".rstrip(": ")
    text = " ".join(response.text.split())[:200]
    return f"HTTP {response.status_code} {response.reason_phrase}: {text}".rstrip(": ")


def call(
    method: str,
    path: str,
    url: str,
    api_key: str | None,
    *,
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Any:
    """One request; its JSON answer, or `fail` with why there is none."""
    try:
        with make_client(url, api_key) as http:
            response = http.request(method, path, json=body, params=params)
    except httpx.InvalidURL as exc:
        fail(f"invalid --url {url!r}: {exc}")
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        fail(f"cannot reach the jobq service at {url}: {reason}")
    if response.is_error:
        fail(problem_message(response))
    try:
        return response.json()
    except ValueError:
        fail(f"the answer from {url}{path} is not JSON (is --url a jobq service?)")


def _console() -> Console:
    """stdout for people; piped, it is wide enough that no figure is cut."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=PIPED_WIDTH)
    return console


def _print_json(answer: Any) -> None:
    typer.echo(json.dumps(answer, indent=2))


# ---- formatting --------------------------------------------------------------------------


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


def _ago(timestamp: str | None) -> str:
    if timestamp is None:
        return "never"
    then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return seconds((datetime.now(UTC) - then).total_seconds()) + " ago"


def _pair(p: dict[str, float | None]) -> str:
    return f"{seconds(p['p50'])}/{seconds(p['p95'])}"


def _window(w: dict[str, int]) -> str:
    return f"{w['enqueued']:,}/{w['succeeded']:,}/{w['failed']:,}"


def _progress(progress: dict[str, Any] | None) -> str:
    if progress is None:
        return "-"
    percent = progress.get("percent")
    parts = [
        f"{percent:.0f}%" if percent is not None else "",
        progress.get("stage") or "",
        progress.get("message") or "",
    ]
    return " ".join(p for p in parts if p) or "-"


def _queues_table(queues: list[dict[str, Any]]) -> Table:
    names = [q["queue"] + (" (paused)" if q["paused"] else "") for q in queues]
    table = Table(title="jobq queues", title_justify="left")
    table.add_column("queue", no_wrap=True, min_width=max(map(len, names), default=5))
    for header in (
        "queued\n(due)",
        "running",
        "failed",
        "oldest\ndue",
        "last min\nin/ok/failed",
        "last hour\nin/ok/failed",
        "wait\np50/p95",
        "run\np50/p95",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    for q, name in zip(queues, names, strict=True):
        counts = q["counts"]
        table.add_row(
            name,
            f"{counts['queued']:,} ({counts['due']:,})",
            f"{counts['running']:,}",
            f"{counts['failed']:,}",
            seconds(q["oldest_due_age_seconds"]),
            _window(q["last_minute"]),
            _window(q["last_hour"]),
            _pair(q["last_hour"]["wait_seconds"]),
            _pair(q["last_hour"]["run_seconds"]),
        )
    return table


def _database_line(db: dict[str, Any]) -> str:
    dead = db["jobs_dead_tuples"]
    live = db["jobs_live_tuples"]
    tuples = "-" if dead is None else f"{dead:,} dead tuples (of {live or 0:,} live)"
    oldest = db["oldest_transaction_age_seconds"]
    transaction = "none" if oldest is None else seconds(oldest)
    xmin = db["oldest_xmin_age"]
    return (
        f"jobs table: {tuples}, last autovacuum {_ago(db['jobs_last_autovacuum'])}; "
        f"oldest open transaction: {transaction}"
        + ("" if xmin is None else f" (xmin age {xmin:,} transactions)")
    )


def _running_table(queue: str, jobs: list[dict[str, Any]]) -> Table:
    table = Table(title=f"running in {queue}", title_justify="left")
    for column in ("job", "type", "attempt", "worker", "running for", "progress"):
        table.add_column(column)
    for job in jobs:
        table.add_row(
            str(job["id"]),
            job["type"],
            f"{job['attempt']}/{job['max_attempts']}",
            job["worker_id"] or "-",
            _ago(job["started_at"]).removesuffix(" ago"),
            _progress(job["progress"]),
        )
    return table


# ---- commands ----------------------------------------------------------------------------


def stats(
    queue: Annotated[str | None, typer.Argument(help="One queue, with its running jobs.")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every queue's backlog, throughput, wait and run times; the database's health."""
    console = _console()
    if queue is not None:
        one = call("GET", f"/v1/queues/{queue}", url, api_key)
        if as_json:
            _print_json(one)
            return
        console.print(_queues_table([one]))
        if one["running_jobs"]:
            console.print(_running_table(queue, one["running_jobs"]))
        return
    answer = call("GET", "/v1/queues", url, api_key)
    if as_json:
        _print_json(answer)
        return
    if answer["queues"]:
        console.print(_queues_table(answer["queues"]))
    else:
        console.print("no queues yet")
    console.print(_database_line(answer["database"]), markup=False)


@jobs_cli.command("list")
def list_jobs(
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    state: Annotated[str | None, typer.Option(help="Only this state.")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 50,
    after: Annotated[int, typer.Option(min=0, help="Start after this id.")] = 0,
    url: UrlOption = DEFAULT_URL,
    api_key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs by id, a page at a time."""
    params = {"queue": queue, "state": state, "type": type_, "limit": limit, "after": after}
    page = call(
        "GET", "/v1/jobs", url, api_key, params={k: v for k, v in params.items() if v is not None}
    )
    if as_json:
        _print_json(page)
        return
    table = Table(title_justify="left")
    for column in ("id", "queue", "type", "state", "attempt", "run at", "last error"):
        table.add_column(column)
    for job in page["jobs"]:
        error = job["last_error"] or {}
        table.add_row(
            str(job["id"]),
            job["queue"],
            job["type"],
            job["state"] + (" (cancel requested)" if job["cancel_requested"] else ""),
            f"{job['attempt']}/{job['max_attempts']}",
            job["run_at"],
            error.get("type") or "-",
        )
    console = _console()
    console.print(table)
    if page["next_after"] is not None:
        console.print(f"more: --after {page['next_after']}", markup=False)


@jobs_cli.command("show")
def show_job(
    job_id: JobIdArgument,
    url: UrlOption = DEFAULT_URL,
    api_key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """One job: its state, timing, progress, last error and attempts (--json adds payload
    and result)."""
    job = call("GET", f"/v1/jobs/{job_id}", url, api_key)
    if as_json:
        _print_json(job)
        return
    table = Table(show_header=False, title=f"job {job['id']}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    progress = job["progress"]
    error = job["last_error"]
    fields = {
        "queue / type": f"{job['queue']} / {job['type']}",
        "state": job["state"] + (" (cancel requested)" if job["cancel_requested"] else ""),
        "attempt": f"{job['attempt']} of {job['max_attempts']}",
        "priority": str(job["priority"]),
        "run at": job["run_at"],
        "created / started / finished": " / ".join(
            job[k] or "-" for k in ("created_at", "started_at", "finished_at")
        ),
        "worker": job["worker_id"] or "-",
        "lease expires": job["lease_expires_at"] or "-",
        "progress": _progress(progress),
        "last error": "-" if error is None else f"{error['type']}: {error.get('message') or ''}",
        "idempotency key": job["idempotency_key"] or "-",
    }
    for name, value in fields.items():
        table.add_row(name, value)
    console = _console()
    console.print(table)
    if job["attempts"]:
        attempts = Table(title="attempts", title_justify="left")
        for column in ("#", "worker", "started", "finished", "outcome", "error"):
            attempts.add_column(column)
        for a in job["attempts"]:
            attempts.add_row(
                str(a["attempt"]),
                a["worker_id"] or "-",
                a["started_at"] or "-",
                a["finished_at"],
                a["outcome"],
                (a["error"] or {}).get("type") or "-",
            )
        console.print(attempts)


def _job_line(job: dict[str, Any]) -> str:
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
    url: UrlOption = DEFAULT_URL,
    api_key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a job: a queued one at once, a running one through its worker's heartbeat."""
    job = call("POST", f"/v1/jobs/{job_id}/cancel", url, api_key, body={})
    if as_json:
        _print_json(job)
    else:
        typer.echo(_job_line(job))


@jobs_cli.command("retry")
def retry_job(
    job_id: JobIdArgument,
    reset_attempts: Annotated[
        bool, typer.Option("--reset-attempts", help="Give it all its attempts again.")
    ] = False,
    run_at: Annotated[
        str | None, typer.Option(help="Not before this time (RFC 3339, with a time zone).")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put a failed or cancelled job back in its queue."""
    body: dict[str, Any] = {}
    if reset_attempts:
        body["reset_attempts"] = True
    if run_at is not None:
        body["run_at"] = run_at
    job = call("POST", f"/v1/jobs/{job_id}/retry", url, api_key, body=body)
    if as_json:
        _print_json(job)
    else:
        typer.echo(_job_line(job))


def _queue_action(action: str) -> Callable[..., None]:
    def command(
        queue: QueueArgument,
        url: UrlOption = DEFAULT_URL,
        api_key: KeyOption = None,
        as_json: JsonOption = False,
    ) -> None:
        answer = call("POST", f"/v1/queues/{queue}/{action}", url, api_key, body={})
        if as_json:
            _print_json(answer)
        elif answer.get("paused"):
            typer.echo(f"queue {answer['queue']}: paused since {answer.get('paused_at')}")
        else:
            typer.echo(f"queue {answer['queue']}: active")

    return command


queues_cli.command("pause", help="Pause a queue: leasing skips it, enqueue still works.")(
    _queue_action("pause")
)
queues_cli.command("resume", help="Resume a paused queue.")(_queue_action("resume"))


def register(cli: typer.Typer) -> None:
    """Add the operator commands to the `jobq` command."""
    cli.command("stats")(stats)
    cli.add_typer(jobs_cli, name="jobs")
    cli.add_typer(queues_cli, name="queues")
