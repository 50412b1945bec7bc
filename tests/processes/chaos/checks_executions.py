"""Invariants of the work: every handler run is accounted for by a lease, every wasted run
explained, no superseded lease accepted."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from tests.processes.chaos import (
    plan_outcome,
)
from tests.processes.chaos.evidence import Execution, lease_uuid
from tests.processes.chaos.options import CLOCK_SLACK_SECONDS
from tests.processes.chaos.verdict import CheckBase, near


class ExecutionChecks(CheckBase):
    """Executions and heartbeats against the leases the database recorded."""

    def executions(self) -> dict[str, Any]:
        v, killed = self.v, self.run.killed_pids
        wasted: Counter[str] = Counter()
        for lease, executions in self.by_lease.items():
            if len(executions) > 1:
                v.fail("one lease ran twice", f"lease {lease}: jobs {[e.job for e in executions]}")
        for e in self.ev.executions:
            record = self.records.get(e.lease)
            if record is None:
                v.fail(
                    "execution under a lease the database never recorded", f"job {e.job} {e.token}"
                )
                continue
            if record.job != e.job or record.attempt != e.attempt:
                v.fail(
                    "attempt recorded differs from what the worker saw",
                    f"job {e.job} {e.token}: worker saw attempt {e.attempt},"
                    f" recorded {record.attempt}",
                )
            end = e.end
            if record.outcome in ("succeeded", "failed"):
                if plan_outcome(e.plan) != record.outcome:
                    v.fail(
                        "recorded outcome differs from what the worker sent",
                        f"job {e.job} attempt {e.attempt}: sent {e.plan},"
                        f" recorded {record.outcome}",
                    )
                if end is None and e.pid not in killed:
                    v.fail("execution never ended", f"job {e.job} {e.token} ({e.worker})")
                elif end is not None and (end["status"] != 200 or end["op"] == "heartbeat"):
                    v.fail(
                        "attempt recorded as finished, but its worker was refused",
                        f"job {e.job} {e.token}: {end['op']} → {end['status']}",
                    )
                continue
            # the lease expired: the run was wasted, and must say why
            if end is not None and end["status"] == 200:
                v.fail(
                    "a lease was accepted after it was superseded",
                    f"job {e.job} {e.token}: {end['op']} → 200, recorded lease_expired",
                )
            e.cause = self.cause(e)
            wasted[e.cause] += 1
            if e.cause == "unexplained":
                v.fail(
                    "execution lost its lease for no reason the run knows",
                    f"job {e.job} {e.token} ({e.worker}): end {end}",
                )
        for lease, record in self.records.items():
            if record.outcome != "lease_expired" and lease not in self.by_lease:
                v.fail(
                    "an attempt no worker ran was finished",
                    f"job {record.job} attempt {record.attempt}",
                )
        unseen = [r for lease, r in self.records.items() if lease not in self.by_lease]
        for record in unseen:
            # the lease's answer was lost: its service or worker crashed, or PostgreSQL restarted
            if record.started is None or near(record.started, self.crashes) is None:
                v.fail(
                    "a lease no worker received, far from any crash",
                    f"job {record.job} attempt {record.attempt}",
                )
        duplicates: Counter[str] = Counter()
        successes: dict[int, list[Execution]] = defaultdict(list)
        for e in self.ev.executions:
            if e.plan == "complete":
                successes[e.job].append(e)
        for job_id, runs in successes.items():
            if len(runs) > 1:
                extra = [e for e in runs if e.cause is not None]
                for e in extra[: len(runs) - 1]:
                    duplicates[e.cause or "unexplained"] += 1
                if len(extra) < len(runs) - 1:
                    duplicates["unexplained"] += len(runs) - 1 - len(extra)
                    v.fail("job ran to success twice without an expired lease", f"job {job_id}")
        needed = sum(
            1 for job in self.jobs.values() for a in job.attempts if a.outcome != "lease_expired"
        )
        if len(self.ev.executions) < needed:
            v.fail(
                "fewer handler runs than finished attempts",
                f"{len(self.ev.executions)} executions, {needed} attempts succeeded or failed",
            )
        return {
            "total": len(self.ev.executions),
            "needed": needed,
            "wasted": sum(wasted.values()),
            "wasted_by_cause": dict(wasted.most_common()),
            "duplicates": sum(duplicates.values()),
            "duplicates_by_cause": dict(duplicates.most_common()),
            "duplicates_unexplained": duplicates["unexplained"],
            "leases_never_received": len(unseen),
        }

    def cause(self, e: Execution) -> str:
        """Why an execution's lease expired under it."""
        end = e.end
        if e.worker == "stale-completer":
            return "stale completer"
        if end is None:
            return "worker SIGKILLed" if e.pid in self.run.killed_pids else "unexplained"
        if end["status"] == 409 and end["code"] == "lease_lost":
            if end["op"] == "heartbeat":
                return "heartbeat found the lease reaped"
            return "ack came after the lease was reaped"
        return "unexplained"

    # ---- heartbeats: none accepted after its lease ended --------------------------------

    def heartbeats(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        for beat in self.ev.heartbeats:
            statuses[str(beat["status"])] += 1
            record = self.records.get(lease_uuid(beat["lease"]))
            if beat["status"] == 404:
                self.v.fail("heartbeat: lease never issued (404)", beat["lease"])
            late = record is not None and beat["t_sent"] > record.finished + CLOCK_SLACK_SECONDS
            if beat["status"] == 200 and record is not None and late:
                self.v.fail(
                    "heartbeat accepted after its lease ended",
                    f"job {record.job} attempt {record.attempt}: sent"
                    f" {beat['t_sent'] - record.finished:.3f}s after",
                )
        return {"total": len(self.ev.heartbeats), "statuses": dict(sorted(statuses.items()))}

    # ---- the reaper: one replica at a time, and it logged what it did -------------------
