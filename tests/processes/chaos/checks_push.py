"""The push load's invariants (`check_push`), from the endpoint's records and the database:

- every job enqueued is there and finished: succeeded once (one `succeeded` attempt
  record, its lease one the endpoint answered 200, or 202 then completed), or (a doomed
  job, and only those) failed for good on its last attempt; its attempts 1..n; each job
  delivered at least once;
- never more deliveries in flight at the endpoint than `max_running`, and the limit
  reached (a delivery ends, at the latest, when its attempt's record was written: a
  starved endpoint may answer after the dispatcher gave up);
- a 429 or 503 spends no attempt: no failed record for its lease, and the job's next
  delivery carries the same attempt (unless the release was lost with its replica or
  the database, and the lease expired: then its record says `lease_expired`; or the
  answer came after the target's timeout: then it failed as `timeout`, counted apart);
- every job event of the queue delivered to the subscription (in a batch answered 2xx)
  at least once, as the database has it; per job, the events first received in
  position order;
- every request signed validly.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from tests.processes.chaos import PUSH_QUEUE
from tests.processes.chaos.databases import Db
from tests.processes.chaos.evidence import epoch, lease_uuid
from tests.processes.chaos.push import MAX_RUNNING, Delivery, PushLoad

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict

RETRY_LATER = ("busy", "unavailable")


async def check_push(load: PushLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The push queue's invariants; failures go to the verdict."""
    rows = await db.fetch(
        "SELECT id, idempotency_key AS key, state::text AS state, attempt, max_attempts,"
        "       result::text AS result, jobq.attempts_of(j)::text AS attempts"
        "  FROM jobq.jobs j WHERE queue = $1",
        PUSH_QUEUE,
    )
    by_job: dict[int, list[Delivery]] = defaultdict(list)
    for d in sorted(load.deliveries, key=lambda d: d.began):
        by_job[d.job].append(d)
    states: Counter[str] = Counter()
    found = {r["key"] for r in rows}
    for key in sorted(set(load.keys) - found):
        v.fail("a push job was lost", key)
    expired_after_later = answered_late = 0
    duplicates = 0
    for r in rows:
        where = f"{r['key']} (job {r['id']})"
        doomed = load.keys.get(r["key"])
        if doomed is None:
            v.fail("a push job nobody enqueued", where)
            continue
        states[r["state"]] += 1
        attempts = json.loads(r["attempts"])
        delivered = by_job.get(r["id"], [])
        if not delivered:
            v.fail("a push job was never delivered", where)
        if [a["attempt"] for a in attempts] != list(range(1, r["attempt"] + 1)):
            v.fail("a push job's attempts have gaps", f"{where}: {attempts}")
        succeeded = [a for a in attempts if a["outcome"] == "succeeded"]
        answered_ok = {
            lease_uuid(d.lease)
            for d in delivered
            if d.answer == "ok" or (d.answer == "accepted" and d.completed == 200)
        }
        duplicates += max(0, len(answered_ok) - 1)
        if r["state"] == "succeeded":
            if doomed:
                v.fail("a doomed push job succeeded", where)
            if len(succeeded) != 1:
                v.fail("a push job did not succeed exactly once", f"{where}: {attempts}")
            elif succeeded[0]["lease_id"] not in answered_ok:
                v.fail("a push job succeeded on a lease its endpoint did not finish", where)
            else:
                result = json.loads(r["result"]) if r["result"] else None
                lease = result.get("lease") if isinstance(result, dict) else None
                if not isinstance(lease, str) or lease_uuid(lease) != succeeded[0]["lease_id"]:
                    v.fail("a push job's result is not its succeeding answer's", where)
        elif r["state"] == "failed":
            last = attempts[-1] if attempts else {}
            if not doomed:
                v.fail("a push job that may succeed failed", f"{where}: {attempts[-3:]}")
            if succeeded or r["attempt"] != r["max_attempts"] or last.get("outcome") == "succeeded":
                v.fail("a push job failed otherwise than on its last attempt", where)
        else:
            v.fail("a push job did not finish", f"{where}: {r['state']}")
        # a 429/503 spends no attempt
        records = {a["lease_id"]: a for a in attempts}
        for n, d in enumerate(delivered):
            record = records.get(lease_uuid(d.lease))
            if record is not None:
                d.ended = min(d.ended or math.inf, epoch(record["finished_at"]))
            if d.answer not in RETRY_LATER:
                continue
            expired = record is not None and record["outcome"] == "lease_expired"
            late = record is not None and (record.get("error") or {}).get("type") == "timeout"
            expired_after_later += expired
            answered_late += late
            if late:
                continue
            if record is not None and not expired:
                v.fail(
                    "a 429/503 answer spent an attempt",
                    f"{where} attempt {d.attempt}: {record['outcome']}",
                )
            after = delivered[n + 1] if n + 1 < len(delivered) else None
            if after is None:
                v.fail("a job answered 429/503 was not delivered again", where)
            elif after.attempt != d.attempt + expired:
                v.fail(
                    "a job answered 429/503 came back with another attempt",
                    f"{where}: attempt {d.attempt}, then {after.attempt}",
                )
    answers = Counter(d.answer for d in load.deliveries)
    unsigned = sum(not d.signed for d in load.deliveries) + sum(not b.signed for b in load.batches)
    if unsigned:
        v.fail("a push or event request was not signed validly", f"{unsigned} requests")
    most = most_in_flight(load, v)
    if most > MAX_RUNNING:
        v.fail("more deliveries in flight than max_running", f"{most}, limit {MAX_RUNNING}")
    if most < MAX_RUNNING:
        v.fail("the push queue's limit was never reached", f"at most {most} in flight")
    events = await check_events(load, db, v)
    return {
        "jobs": sum(states.values()),
        "states": dict(sorted(states.items())),
        "deliveries": len(load.deliveries),
        "answers": dict(sorted(answers.items())),
        "retry_later_lease_expired": expired_after_later,
        "retry_later_past_timeout": answered_late,
        "duplicate_successes": duplicates,
        "max_running": MAX_RUNNING,
        "most_in_flight": most,
        "events": events,
    }


def most_in_flight(load: PushLoad, v: Verdict) -> int:
    """The most deliveries the endpoint had in flight at once (an end before a start at
    the same instant)."""
    edges: list[tuple[float, int]] = []
    for d in load.deliveries:
        if d.ended is None:
            v.fail("a delivery never ended at the endpoint", f"job {d.job} attempt {d.attempt}")
            continue
        edges += [(d.began, 1), (d.ended, -1)]
    most = running = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


async def check_events(load: PushLoad, db: Db, v: Verdict) -> dict[str, Any]:
    rows = await db.fetch(
        "SELECT position, kind::text AS kind, job_id, attempt FROM jobq.job_events"
        " WHERE queue = $1 AND job_id IS NOT NULL ORDER BY position",
        PUSH_QUEUE,
    )
    stored = {r["position"]: (r["kind"], r["job_id"], r["attempt"]) for r in rows}
    delivered: Counter[int] = Counter()
    first_seen: dict[int, list[int]] = defaultdict(list)  # job → positions, first receipt
    seen: set[int] = set()
    ids: Counter[str] = Counter()
    for batch in sorted(load.batches, key=lambda b: b.at):
        ids[batch.webhook_id] += 1
        for e in batch.events:
            if e["job_id"] is None:
                continue
            if stored.get(e["id"]) != (e["kind"], e["job_id"], e["attempt"]):
                v.fail("a subscription got an event the database does not have", str(e))
            if e["id"] not in seen:
                seen.add(e["id"])
                first_seen[e["job_id"]].append(e["id"])
            if 200 <= batch.status < 300:
                delivered[e["id"]] += 1
    missing = [p for p in stored if p not in delivered]
    if missing:
        v.fail("a job event was never delivered", f"{len(missing)}, first {missing[:5]}")
    for job, positions in first_seen.items():
        if positions != sorted(positions):
            v.fail("a job's events arrived out of order", f"job {job}: {positions}")
    by_job: dict[int, list[str]] = defaultdict(list)
    for _, (kind, job, _) in sorted(stored.items()):
        by_job[job].append(kind)
    for job, kinds in by_job.items():
        if kinds[0] != "enqueued" or kinds[-1] not in ("succeeded", "failed"):
            v.fail("a push job's events do not begin and end as its life", f"job {job}: {kinds}")
    return {
        "stored": len(stored),
        "requests": len(load.batches),
        "requests_refused": sum(1 for b in load.batches if not 200 <= b.status < 300),
        "delivered": len(delivered),
        "delivered_twice_or_more": sum(1 for n in delivered.values() if n > 1),
        "webhook_ids_repeated": sum(1 for n in ids.values() if n > 1),
    }
