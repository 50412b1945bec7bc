"""`jobq stats [QUEUE]`: every queue's backlog, throughput, wait and run times, and the
database's health; one queue with its longest-running jobs and, pushed, its
deliveries."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from app.cli._output import (
    ago,
    console,
    count,
    narrow,
    print_json,
    progress,
    seconds,
    table,
    warn,
)
from app.cli._service import Session
from jobq_client import QueueStats


def _name(queue: QueueStats) -> str:
    return queue.queue + (" (paused)" if queue.paused else "")


def _window(w: dict[str, int]) -> str:
    return f"{count(w['enqueued'])}/{count(w['succeeded'])}/{count(w['failed'])}"


def _pair(p: dict[str, float | None]) -> str:
    return f"{seconds(p['p50'])}/{seconds(p['p95'])}"


def _backlog(queues: list[QueueStats], out: Console) -> None:
    """Queued, due, running, failed and the oldest due job's age: what needs attention."""
    rows = table(
        "backlog" if narrow(out) else "jobq queues",
        [("queue", "key"), ("queued", "number"), ("due", "number"), ("running", "number"),
         ("waiting", "number"), ("failed", "number"), ("oldest due", "number")]
        + ([] if narrow(out) else [
            ("last min in/ok/failed", "number"), ("last hour in/ok/failed", "number"),
            ("wait p50/p95", "number"), ("run p50/p95", "number"),
        ]),
    )  # fmt: skip
    for q in queues:
        counts = q.counts
        cells = [
            _name(q),
            count(counts["queued"]),
            count(counts["due"]),
            count(counts["running"]),
            count(counts["waiting"]),
            count(counts["failed"]),
            seconds(q.oldest_due_age_seconds),
        ]
        if not narrow(out):
            cells += _windows(q)
        rows.add_row(*cells)
    out.print(rows)


def _windows(q: QueueStats) -> list[str]:
    """In/ok/failed in the last minute and hour, the last hour's wait and run times."""
    hour = q.raw["last_hour"]
    return [
        _window(q.raw["last_minute"]),
        _window(hour),
        _pair(hour["wait_seconds"]),
        _pair(hour["run_seconds"]),
    ]


def _throughput(queues: list[QueueStats], out: Console) -> None:
    """The windows and percentiles, as a second table when the terminal is narrow."""
    rows = table(
        "throughput: in/ok/failed; p50/p95 wait (enqueue to lease) and run",
        [("queue", "key"), ("last min", "number"), ("last hour", "number"),
         ("wait", "number"), ("run", "number")],
    )  # fmt: skip
    for q in queues:
        rows.add_row(_name(q), *_windows(q))
    out.print(rows)


def show_queues(queues: list[QueueStats], out: Console) -> None:
    """The figures of these queues: one table when there is room, two at 80 columns."""
    _backlog(queues, out)
    if narrow(out):
        out.print()
        _throughput(queues, out)


def _running(queue: str, jobs: list[dict[str, Any]], out: Console) -> None:
    rows = table(
        f"running in {queue}",
        [("job", "number"), ("type", "key"), ("attempt", "number"), ("worker", "key"),
         ("running for", "number"), ("progress", "text")],
    )  # fmt: skip
    for job in jobs:
        rows.add_row(
            str(job["id"]),
            job["type"],
            f"{job['attempt']}/{job['max_attempts']}",
            job["worker_id"] or "-",
            ago(job["started_at"]).removesuffix(" ago"),
            progress(job["progress"]),
        )
    out.print(rows)


def database_line(db: dict[str, Any]) -> str:
    dead = db["jobs_dead_tuples"]
    live = db["jobs_live_tuples"]
    tuples = "-" if dead is None else f"{count(dead)} dead tuples (of {count(live or 0)} live)"
    oldest = db["oldest_transaction_age_seconds"]
    transaction = "none" if oldest is None else seconds(oldest)
    xmin = db["oldest_xmin_age"]
    return (
        f"jobs table: {tuples}, last autovacuum {ago(db['jobs_last_autovacuum'])}; "
        f"oldest open transaction: {transaction}"
        + ("" if xmin is None else f" (xmin age {count(xmin)} transactions)")
        + f"; reaper's last pass {ago(db.get('reaper_last_pass'))}"
    )


def limits_line(limits: dict[str, Any]) -> str:
    """The limits in force and what each holds back, on one line."""
    held = limits["throttled"]
    parts = []
    if limits["max_running"] is not None:
        parts.append(f"max_running {limits['max_running']} ({held['max_running']} held back)")
    if limits["max_running_per_key"] is not None:
        parts.append(
            f"max_running_per_key {limits['max_running_per_key']}"
            f" ({held['max_running_per_key']} held back)"
        )
    rate = limits["rate_limit"]
    if rate is not None:
        parts.append(
            f"rate {rate['jobs']} per {rate['per_seconds']:g}s ({rate['used']} used,"
            f" {held['rate_limit']} held back)"
        )
    return "limits: " + "; ".join(parts)


def unserved_line(unserved: list[dict[str, Any]]) -> str:
    """The types whose due jobs no worker leased lately, on one line."""
    parts = [
        f"{u['type']} (due {seconds(u['oldest_due_age_seconds'])}, "
        + (
            "never leased)"
            if u["last_leased_at"] is None
            else f"leased {ago(u['last_leased_at'])})"
        )
        for u in unserved
    ]
    return "no worker leased lately: " + ", ".join(parts)


def fair_keys_line(keys: list[dict[str, Any]]) -> str:
    """A fair queue's busiest keys, on one line."""
    parts = [
        f"{k['fairness_key'] or '(none)'} {count(k['queued'])} queued"
        f" ({count(k['due'])} due), {count(k['running'])} running"
        for k in keys
    ]
    return "busiest keys: " + "; ".join(parts)


def push_lines(push: dict[str, Any]) -> list[str]:
    """A pushed queue's deliveries (every replica's) and its breaker, one line a window."""
    breaker = push["breaker"]
    state = breaker["state"].replace("_", "-")
    if breaker["open_until"] is not None and breaker["state"] == "open":
        state += f", reopens {ago(breaker['open_until'])}"
    lines = [f"push to {push['target_host']}: breaker {state}"]
    for name, key in (("last min", "last_minute"), ("last hour", "last_hour")):
        window = push[key]
        classes = ", ".join(f"{c} {count(n)}" for c, n in window["classes"].items() if n)
        lines.append(
            f"  {name}: {count(window['deliveries'])} deliveries"
            + (f" ({classes})" if classes else "")
            + f", p50/p95 {_pair(window['latency_seconds'])}"
        )
    return lines


def show_queue(session: Session, queue: str) -> None:
    """One queue's figures and its longest-running jobs; on stderr, a warning when
    nothing ever used the queue (a misspelt name?)."""
    one = session.jobq.get_queue(queue)
    if one.raw.get("known") is False:
        warn(
            f"queue {queue!r} has no jobs and no settings, and no worker ever leased from it"
            " (is its name misspelt?)"
        )
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    show_queues([one], out)
    if one.limits:
        out.print(limits_line(one.limits), markup=False)
    if one.raw.get("unserved_types"):
        out.print(unserved_line(one.raw["unserved_types"]), markup=False)
    if one.raw.get("fair_keys"):
        out.print(fair_keys_line(one.raw["fair_keys"]), markup=False)
    if one.raw.get("push"):
        for line in push_lines(one.raw["push"]):
            out.print(line, markup=False)
    if one.raw["running_jobs"]:
        out.print()
        _running(queue, one.raw["running_jobs"], out)


def stats(
    ctx: typer.Context,
    queue: Annotated[str | None, typer.Argument(help="One queue, with its running jobs.")] = None,
) -> None:
    """Every queue's figures, and the database's health.

    Backlog, throughput, wait and run times; with QUEUE, that queue and its
    running jobs.
    """
    session = Session.of(ctx)
    if queue is not None:
        show_queue(session, queue)
        return
    answer = session.jobq.get_stats()
    if session.as_json:
        print_json(session.answer)
        return
    out = console()
    if answer.queues:
        show_queues(answer.queues, out)
    else:
        out.print("no queues yet")
    out.print(database_line(answer.database), markup=False)
