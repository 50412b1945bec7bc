"""The lifecycle load's invariants (`check_lifecycle`): see `lifecycle`'s docstring."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.processes.chaos import LIFECYCLE_QUEUE
from tests.processes.chaos.databases import Db
from tests.processes.chaos.evidence import epoch, lease_uuid
from tests.processes.chaos.lifecycle import (
    REFUSED_CODES,
    Held,
    LifecycleLoad,
    SnoozePlan,
    TimeoutPlan,
    life_key,
)
from tests.processes.chaos.options import CLOCK_SLACK_SECONDS

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict


@dataclass(slots=True)
class Row:
    """A lifecycle job as the database has it, its times in seconds since the epoch."""

    id: int
    key: str
    state: str
    attempt: int
    max_attempts: int
    snoozes: int
    timeout: int | None
    start_by: float | None
    started: float | None
    finished: float | None
    error: dict[str, Any] | None
    attempts: list[dict[str, Any]]

    def outcomes(self, *outcomes: str) -> list[dict[str, Any]]:
        return [a for a in self.attempts if a["outcome"] in outcomes]


async def load_rows(db: Db) -> dict[str, Row]:
    rows = await db.fetch(
        """
        SELECT id, idempotency_key AS key, state::text AS state, attempt, max_attempts,
               snoozes, timeout_seconds,
               extract(epoch FROM start_by)::float8 AS start_by,
               extract(epoch FROM started_at)::float8 AS started,
               extract(epoch FROM finished_at)::float8 AS finished,
               last_error::text AS error, jobq.attempts_of(j)::text AS attempts
          FROM jobq.jobs j WHERE queue = $1
        """,
        LIFECYCLE_QUEUE,
    )
    found = {}
    for r in rows:
        attempts = json.loads(r["attempts"])
        for a in attempts:
            a["started"] = epoch(a["started_at"])
            a["finished"] = epoch(a["finished_at"])
        found[r["key"]] = Row(
            r["id"],
            r["key"],
            r["state"],
            r["attempt"],
            r["max_attempts"],
            r["snoozes"],
            r["timeout_seconds"],
            r["start_by"],
            r["started"],
            r["finished"],
            json.loads(r["error"]) if r["error"] is not None else None,
            attempts,
        )
    return found


def indices(load: LifecycleLoad, kind: str) -> list[int]:
    """The indices of the jobs of a kind that were enqueued."""
    prefix = life_key(kind, 0)[:-1]
    return sorted(int(key[len(prefix) :]) for key in load.keys if key.startswith(prefix))


def error_type(row: Row) -> str | None:
    return None if row.error is None else row.error.get("type")


async def check_lifecycle(load: LifecycleLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The lifecycle queue's invariants; failures go to the verdict."""
    rows = await load_rows(db)
    for example in load.unexpected:
        v.fail("a lifecycle call was answered unexpectedly", example)
    for key in sorted(load.keys - rows.keys()):
        v.fail("a lifecycle job was lost", key)
    for key in sorted(rows.keys() - load.keys):
        v.fail("a lifecycle job nobody enqueued", key)
    return {
        "timeouts": check_timeouts(load, rows, v),
        "snoozes": check_snoozes(load, rows, v),
        "deadlines": check_deadlines(load, rows, v),
    }


def check_timeouts(load: LifecycleLoad, rows: dict[str, Row], v: Verdict) -> dict[str, Any]:
    states: Counter[str] = Counter()
    by_id: dict[int, Row] = {}
    records: dict[str, dict[str, Any]] = {}
    held_by_lease = {lease_uuid(held.token): held for held in load.held}
    lateness: Counter[str] = Counter()  # why attempts meant to finish in time did not
    failed_by_load = 0
    timed_out = 0
    for index in indices(load, "timeout"):
        row = rows.get(life_key("timeout", index))
        if row is None:
            continue
        plan = TimeoutPlan.of(load.seed, index)
        by_id[row.id] = row
        states[row.state] += 1
        where = f"{row.key} (job {row.id})"
        if (row.timeout, row.max_attempts) != (plan.timeout, plan.max_attempts):
            v.fail("a timed job was stored otherwise than enqueued", where)
        if [a["attempt"] for a in row.attempts] != list(range(1, row.attempt + 1)):
            v.fail("a timed job's attempts have gaps", f"{where}: attempt {row.attempt}")
        for a in row.attempts:
            records[a["lease_id"]] = a
            ran = a["finished"] - a["started"]
            if a["outcome"] == "succeeded":
                if ran >= plan.timeout:
                    v.fail("an attempt completed past its timeout", f"{where}: ran {ran:.3f}s")
                continue
            timed_out += 1
            error = a.get("error") or {}
            if a["outcome"] != "timeout" or error.get("type") != "timeout":
                v.fail(
                    "a timed attempt ended otherwise than by its timeout",
                    f"{where} attempt {a['attempt']}: {a['outcome']} {error.get('type')}",
                )
            elif (error.get("details") or {}).get("timeout_seconds") != plan.timeout:
                v.fail("a timeout error names another timeout", f"{where}: {error}")
            if ran < plan.timeout - CLOCK_SLACK_SECONDS:
                v.fail(
                    "an attempt was failed as timed out before its timeout", f"{where}: {ran:.3f}s"
                )
            if a["attempt"] > plan.hangs:
                reason = why_late(held_by_lease.get(a["lease_id"]))
                if reason is None:
                    v.fail(
                        "an attempt finished in time was failed as timed out",
                        f"{where} attempt {a['attempt']}",
                    )
                else:
                    lateness[reason] += 1
        if row.state == "succeeded":
            if plan.for_good:
                v.fail("a job that hangs every time succeeded", where)
            elif len(row.outcomes("timeout")) < plan.hangs:
                v.fail("a hung attempt did not time out", f"{where}: {row.attempts}")
        elif row.state == "failed":
            if row.attempt != row.max_attempts or error_type(row) != "timeout":
                v.fail(
                    "a timed job failed otherwise than by its last attempt's timeout",
                    f"{where}: attempt {row.attempt}/{row.max_attempts}, {error_type(row)}",
                )
            elif not plan.for_good:
                failed_by_load += 1  # each attempt's lateness is accounted for above
        else:
            v.fail("a timed job did not end", f"{where}: {row.state}")
    # what the lease loops saw, against the database
    calls: Counter[str] = Counter()
    refused_early = 0.0  # the longest before its timeout a call was sent that was refused
    hung = 0
    for held in load.held:
        row = by_id.get(held.job)
        record = records.get(lease_uuid(held.token))
        where = f"job {held.job} attempt {held.attempt}"
        hung += held.hang
        if row is None:
            v.fail("a timed lease of no timed job", where)
            continue
        if record is None:
            v.fail("a timed lease left no attempt record", where)
            continue
        if abs(record["started"] + (row.timeout or 0) - held.timeout_at) > 0.001:
            v.fail("a lease's timeout_at is not its start + timeout_seconds", where)
        if max(held.ends) > held.timeout_at:
            v.fail(
                "a lease was given an end past its timeout",
                f"{where}: {max(held.ends) - held.timeout_at:.3f}s past",
            )
        if held.hang and record["outcome"] != "timeout":
            v.fail("a hung attempt was not failed as timeout", f"{where}: {record['outcome']}")
        for call in held.calls:
            late = call.first > held.timeout_at + CLOCK_SLACK_SECONDS
            if call.status == 409:
                refused_early = max(refused_early, held.timeout_at - call.first)
            calls[
                f"{call.op} {'late' if late else 'in time'} {call.status} {call.code or ''}".strip()
            ] += 1
            if call.status == 200 and late:
                v.fail(
                    "a call was accepted past its attempt's timeout",
                    f"{where}: {call.op} sent {call.first - held.timeout_at:.3f}s after",
                )
            elif call.status == 200 and call.op != "heartbeat" and record["outcome"] != "succeeded":
                v.fail(
                    "an accepted complete left no succeeded attempt",
                    f"{where}: {record['outcome']}",
                )
            elif call.status != 200 and (call.status != 409 or call.code not in REFUSED_CODES):
                v.fail(
                    "a timed lease's call was refused unexpectedly",
                    f"{where}: {call.op} → {call.status} {call.code}",
                )
            elif call.status == 409 and record["outcome"] != "timeout":
                v.fail("a call was refused, its attempt not timed out", f"{where}: {call.op}")
        final = [c for c in held.calls if c.op != "heartbeat"]
        if held.hang and final and final[-1].status == 200:
            v.fail("a hung attempt was finished", f"{where}: {final[-1].op}")
    if hung == 0:
        v.fail("no timed attempt hung", f"{len(load.held)} leases")
    return {
        "jobs": sum(states.values()),
        "states": dict(sorted(states.items())),
        "leases": len(load.held),
        "hung": hung,
        "timed_out": timed_out,
        "late": dict(sorted(lateness.items())),
        "failed_by_load": failed_by_load,
        "calls": dict(sorted(calls.items())),
        "refused_seconds_before_timeout": round(refused_early, 3),
    }


def why_late(held: Held | None) -> str | None:
    """Why an attempt meant to finish in time timed out, as its lease loop saw it: the
    load or a fault delayed the lease's answer or its complete past the timeout. None
    when nothing did: its complete was answered before the timeout, yet refused."""
    if held is None:
        return "lease never reached its loop"
    if held.received > held.timeout_at - CLOCK_SLACK_SECONDS:
        return "lease reached its loop after the timeout"
    finals = [call for call in held.calls if call.op != "heartbeat"]
    if not finals:
        return "complete gave up through faults"
    if finals[-1].answered > held.timeout_at - CLOCK_SLACK_SECONDS:
        return "complete answered after the timeout"
    return None


def check_snoozes(load: LifecycleLoad, rows: dict[str, Row], v: Verdict) -> dict[str, Any]:
    states: Counter[str] = Counter()
    done = first_attempt = 0
    by_id: dict[int, Row] = {}
    for index in indices(load, "snooze"):
        row = rows.get(life_key("snooze", index))
        if row is None:
            continue
        by_id[row.id] = row
        plan = SnoozePlan.of(load.seed, index)
        states[row.state] += 1
        where = f"{row.key} (job {row.id})"
        snoozed = row.outcomes("snoozed")
        done += len(snoozed)
        if row.state != "succeeded":
            v.fail("a snoozed job did not succeed", f"{where}: {row.state}")
        if len(row.outcomes("succeeded")) != (row.state == "succeeded"):
            v.fail("a snoozed job succeeded more than once", where)
        if row.snoozes != len(plan.seconds) or len(snoozed) != len(plan.seconds):
            v.fail(
                "a job snoozed otherwise than planned",
                f"{where}: snoozes {row.snoozes}, {len(snoozed)} entries,"
                f" planned {len(plan.seconds)}",
            )
        spent = [a for a in row.attempts if a["outcome"] != "snoozed"]
        if [a["attempt"] for a in spent] != list(range(1, row.attempt + 1)):
            v.fail("a snooze spent an attempt", f"{where}: attempt {row.attempt}, {spent}")
        first_attempt += row.attempt == 1
        count = 0
        for n, a in enumerate(row.attempts):
            if a["outcome"] != "snoozed":
                count += 1
                continue
            if a["attempt"] != count + 1:
                v.fail("a snooze was recorded with another attempt", f"{where}: {a}")
            k = sum(1 for b in row.attempts[:n] if b["outcome"] == "snoozed")
            after = row.attempts[n + 1] if n + 1 < len(row.attempts) else None
            if k < len(plan.seconds) and after is not None:
                early = a["finished"] + plan.seconds[k] - after["started"]
                if early > CLOCK_SLACK_SECONDS:
                    v.fail(
                        "a snoozed job ran before its snooze was over",
                        f"{where}: {early:.3f}s early",
                    )
    answers: Counter[str] = Counter()
    for s in load.snoozed:
        answers[f"{s['status']} {s['code'] or ''}".strip()] += 1
        where = f"job {s['job']} attempt {s['attempt']}"
        if s["status"] == 200:
            answer = s["answer"]
            if answer != {
                "state": "queued",
                "attempt": s["attempt"] - 1,
                "snoozes": s["snoozes"] + 1,
            }:
                v.fail("a snooze answered another job than it made", f"{where}: {answer}")
        elif s["status"] != 409 or s["code"] != "lease_lost":
            v.fail("a snooze was refused", f"{where}: {s['status']} {s['code']}")
    return {
        "jobs": sum(states.values()),
        "states": dict(sorted(states.items())),
        "snoozes": done,
        "answers": dict(sorted(answers.items())),
        "succeeded_on_first_attempt": first_attempt,
    }


def check_deadlines(load: LifecycleLoad, rows: dict[str, Row], v: Verdict) -> dict[str, Any]:
    ends: Counter[str] = Counter()
    expired_unleased = expired_leased = 0
    by_id: dict[int, Row] = {}
    for key, group in sorted(load.groups.items()):
        row = rows.get(key)
        if row is None or key not in load.keys:
            continue
        by_id[row.id] = row
        where = f"{key} (job {row.id}, {group})"
        start_by = row.start_by
        if start_by is None or abs(start_by - load.start_by[key]) > 0.001:
            v.fail("a start_by was stored otherwise than sent", f"{where}: {start_by}")
            continue
        expired = row.state == "cancelled" and error_type(row) == "expired"
        ends[f"{group} {'expired' if expired else row.state}"] += 1
        for a in row.attempts:
            if a["started"] >= start_by:
                v.fail(
                    "a job was leased after its start_by",
                    f"{where}: attempt {a['attempt']} {a['started'] - start_by:.3f}s after",
                )
        if row.started is not None and row.started >= start_by:
            v.fail("a job was leased after its start_by", f"{where}: first lease")
        if row.state == "cancelled":
            if not expired:
                v.fail("a deadline job was cancelled, not expired", f"{where}: {row.error}")
            elif (row.finished or 0) < start_by:
                v.fail("a job expired before its start_by", where)
            elif row.outcomes("succeeded"):
                v.fail("a job that succeeded expired", where)
            details = (row.error or {}).get("details") or {}
            if expired and abs(epoch(str(details.get("start_by"))) - start_by) > 0.001:
                v.fail("an expiry names another start_by", f"{where}: {row.error}")
            expired_unleased += row.attempt == 0
            expired_leased += row.attempt > 0
        elif row.state == "succeeded":
            if len(row.outcomes("succeeded")) != 1:
                v.fail("a deadline job succeeded more than once", where)
        else:
            v.fail("a deadline job did not end", f"{where}: {row.state}")
        if row.attempt == 0 and not expired:
            v.fail("a job never leased did not expire", f"{where}: {row.state}")
        if group == "roomy" and row.state != "succeeded":
            v.fail("a job with time to spare did not run", f"{where}: {row.state}")
        if group in ("doomed", "paused") and (not expired or row.attempt != 0):
            v.fail(
                "a job whose deadline passed before it could be leased was not expired",
                f"{where}: {row.state}, attempt {row.attempt}",
            )
    late = 0
    for job_id, sent in load.deadline_leases:
        row = by_id.get(job_id)
        if row is None or row.start_by is None:
            v.fail("a deadline lease of no deadline job", f"job {job_id}")
        elif sent > row.start_by + CLOCK_SLACK_SECONDS:
            late += 1
            v.fail(
                "a job was leased after its start_by (by the harness's clock)",
                f"{row.key}: lease sent {sent - row.start_by:.3f}s after",
            )
    return {
        "jobs": len(by_id),
        "ends": dict(sorted(ends.items())),
        "expired_unleased": expired_unleased,
        "expired_after_a_lease": expired_leased,
        "leases": len(load.deadline_leases),
        "pauses": load.pauses,
    }
