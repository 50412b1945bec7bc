"""What a run leaves behind, read back: the jobs and their attempts, the workers' executions,
the reaper's log lines."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.processes.chaos import (
    SIDE_QUEUES,
    Plan,
    Script,
    read_events,
)
from tests.processes.chaos.databases import Db
from tests.processes.chaos.options import REAPED


def lease_uuid(token: str) -> str:
    """The uuid of a lease token `<job id>-<hex>`, as the attempts record it."""
    return str(uuid.UUID(token.split("-", 1)[1]))


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


@dataclass(slots=True)
class Attempt:
    """One finished attempt, as the database recorded it."""

    job: int
    attempt: int
    lease: str
    outcome: str
    started: float | None
    finished: float


@dataclass(slots=True)
class Job:
    id: int
    queue: str
    state: str
    attempt: int
    payload: Any
    key: str | None
    result: Any
    attempts: list[Attempt]
    created: float
    finished: float | None

    @property
    def script(self) -> Script:
        return Script.from_payload(self.payload)


@dataclass(slots=True)
class Execution:
    """One handler run, as its worker logged it."""

    job: int
    token: str
    lease: str
    attempt: int
    plan: Plan
    pid: int
    worker: str
    started: float
    end: dict[str, Any] | None = None
    cause: str | None = None  # why it was wasted, when its lease expired


@dataclass(slots=True)
class Batch:
    """One reaper log line: a batch of expired leases one replica took back."""

    service: str
    replica: str
    started: float
    ended: float
    requeued: int
    failed: int
    job_ids: list[int]


def parse_reaper_line(line: str, service: str = "") -> Batch | None:
    """A `reaped replica=… batch_started=… …` line of a service's log, else None."""
    match = REAPED.match(line)
    if match is None:
        return None
    ids = match["ids"]
    return Batch(
        service=service,
        replica=match["replica"],
        started=float(match["started"]),
        ended=float(match["ended"]),
        requeued=int(match["requeued"]),
        failed=int(match["failed"]),
        job_ids=[int(i) for i in ids.split(",")] if ids else [],
    )


async def load_jobs(db: Db) -> dict[int, Job]:
    rows = await db.fetch(
        """
        SELECT id, queue, state::text AS state, attempt, payload::text AS payload,
               idempotency_key, result::text AS result,
               jobq.attempts_of(j)::text AS attempts,
               extract(epoch FROM created_at)::float8 AS created,
               extract(epoch FROM finished_at)::float8 AS finished
          FROM jobq.jobs j WHERE queue <> ALL($1) ORDER BY id
        """,
        SIDE_QUEUES,
    )
    jobs = {}
    for row in rows:
        attempts = [
            Attempt(
                job=row["id"],
                attempt=a["attempt"],
                lease=str(a["lease_id"]),
                outcome=a["outcome"],
                started=epoch(a["started_at"]) if a.get("started_at") else None,
                finished=epoch(a["finished_at"]),
            )
            for a in json.loads(row["attempts"])
        ]
        jobs[row["id"]] = Job(
            id=row["id"],
            queue=row["queue"],
            state=row["state"],
            attempt=row["attempt"],
            payload=json.loads(row["payload"]),
            key=row["idempotency_key"],
            result=json.loads(row["result"]) if row["result"] is not None else None,
            attempts=attempts,
            created=row["created"],
            finished=row["finished"],
        )
    return jobs


@dataclass(slots=True)
class Evidence:
    jobs: dict[int, Job]
    executions: list[Execution] = field(default_factory=list)
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    enqueued: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    producer_done: list[float] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)


def gather_evidence(run_dir: Path, jobs: dict[int, Job]) -> Evidence:
    """The processes' event logs and the services' reaper lines, next to the database."""
    evidence = Evidence(jobs)
    by_lease: dict[str, Execution] = {}
    ends: list[dict[str, Any]] = []
    for path in sorted((run_dir / "events").glob("*.jsonl")):
        for record in read_events(path):
            kind = record["ev"]
            if kind == "start":
                execution = Execution(
                    job=record["job"],
                    token=record["lease"],
                    lease=lease_uuid(record["lease"]),
                    attempt=record["attempt"],
                    plan=record["plan"],
                    pid=record["pid"],
                    worker=record["worker"],
                    started=record["t"],
                )
                evidence.executions.append(execution)
                by_lease.setdefault(execution.lease, execution)
            elif kind == "end":
                ends.append(record)
            elif kind == "hb":
                evidence.heartbeats.append(record)
            elif kind == "enq":
                evidence.enqueued.append(record)
            elif kind == "done":
                evidence.producer_done.append(record["t"])
            elif kind in ("http_5xx", "timeout", "conn_error", "gave_up", "unexpected", "rejected"):
                evidence.problems[kind].append(record)
    for record in ends:
        started = by_lease.get(lease_uuid(record["lease"]))
        if started is None:
            evidence.problems["end_without_start"].append(record)
        else:
            started.end = record
    for log in sorted((run_dir / "logs").glob("service-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            batch = parse_reaper_line(line, log.stem)
            if batch is not None:
                evidence.batches.append(batch)
    return evidence


# ---- the invariants --------------------------------------------------------------------
