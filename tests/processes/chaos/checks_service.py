"""Invariants of the service: one reaper at a time, HTTP that fails fast and only with 503,
every fault injected as planned, the API agreeing with the database."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from tests.processes.chaos import (
    job_key,
)
from tests.processes.chaos.evidence import Attempt, Batch
from tests.processes.chaos.options import (
    CLOCK_SLACK_SECONDS,
    CRASHES,
    FAIL_FAST_SECONDS,
    HANG_SECONDS,
    INTERRUPTED_ENQUEUES,
    OUTAGE_GRACE_SECONDS,
    PROBES,
    READYZ_503_CODES,
    REAP_LOG_SECONDS,
    RECOVERY_TIMEOUT_SECONDS,
    RESERVED_JOBS,
    SERVICES,
    STOP_SLACK_SECONDS,
    UNAVAILABLE,
)
from tests.processes.chaos.procs import Fault
from tests.processes.chaos.verdict import CheckBase, near


class ServiceChecks(CheckBase):
    """The reaper's batches, the HTTP answers, the faults, the API's view."""

    def reaper(self) -> dict[str, Any]:
        v = self.v
        batches = sorted(self.ev.batches, key=lambda b: b.started)
        overlaps = 0
        open_batches: list[Batch] = []
        for batch in batches:
            open_batches = [b for b in open_batches if b.ended > batch.started]
            for other in open_batches:
                if other.replica != batch.replica:
                    overlaps += 1
                    v.fail(
                        "two replicas reaped at once",
                        f"{other.replica} [{other.started:.6f}, {other.ended:.6f}] and"
                        f" {batch.replica} [{batch.started:.6f}, {batch.ended:.6f}]",
                    )
            open_batches.append(batch)
            if batch.requeued + batch.failed != len(batch.job_ids):
                v.fail("reaper line counts differ from its job ids", batch.replica)
        # Each logged reap of a job takes the latest lease_expired record of that job stamped
        # (transaction start) before the batch ended; reaps of one job are a lease apart.
        expired: dict[int, list[Attempt]] = defaultdict(list)
        for job in self.jobs.values():
            expired[job.id] = [a for a in job.attempts if a.outcome == "lease_expired"]
        records = sum(len(r) for r in expired.values())
        for batch in sorted(batches, key=lambda b: b.ended):
            for job_id in batch.job_ids:
                if job_id in self.run.side_ids:
                    continue  # a side load's: checked by its own invariants
                left = [
                    r for r in expired[job_id] if r.finished <= batch.ended + CLOCK_SLACK_SECONDS
                ]
                if not left:
                    v.fail(
                        "reaper logged a job the database shows no expiry for",
                        f"job {job_id} by {batch.replica} at {batch.started:.3f}",
                    )
                    continue
                expired[job_id].remove(max(left, key=lambda r: r.finished))
        unlogged: Counter[str] = Counter()
        stops = [f for f in self.run.faults if f.kind in CRASHES and f.kind != "worker_sigkill"]
        for record in (r for left in expired.values() for r in left):
            # a service killed (or stopped) right after a reap's commit takes its line along;
            # the record is stamped with the reap's transaction start, which may come a
            # while before the stop on a loaded machine
            fault = near(record.finished, stops, slack=STOP_SLACK_SECONDS, before=REAP_LOG_SECONDS)
            if fault is None:
                v.fail("a reap no replica logged", f"job {record.job} attempt {record.attempt}")
            else:
                unlogged[fault.kind] += 1
        if not batches:
            v.fail("the reaper never logged a batch", f"{records} lease_expired records")
        return {
            "batches": len(batches),
            "replicas": len({b.replica for b in batches}),
            "reaped_logged": sum(len(b.job_ids) for b in batches),
            "lease_expired_records": records,
            "unlogged_at_crash": dict(unlogged),
            "overlaps": overlaps,
        }

    # ---- HTTP: 503 problem while PostgreSQL is away, never 500, never a hang -------------

    def http(self) -> dict[str, Any]:
        v, problems = self.v, self.ev.problems
        statuses: Counter[str] = Counter()
        for record in problems["http_5xx"]:
            statuses[f"{record['status']} {record['code']}"] += 1
            if record["status"] == 500:
                v.fail("500 answer", f"{record['role']} {record['op']} at {record['base']}")
            elif record["status"] != 503 or record["code"] != "database_unavailable":
                v.fail(
                    "5xx that is not a database_unavailable problem",
                    f"{record['status']} {record['code']} for {record['op']}",
                )
        for record in problems["timeout"]:
            v.fail(
                "request hung (no answer in time)",
                f"{record['role']} {record['op']} at {record['base']}",
            )
        for kind in ("gave_up", "unexpected", "rejected", "end_without_start"):
            for record in problems[kind]:
                v.fail(kind.replace("_", " "), json.dumps(record)[:300])
        for probe in self.run.probes:
            allowed = READYZ_503_CODES if probe.path == "readyz" else (UNAVAILABLE,)
            status = probe.status or 0
            if status >= 500 and (status != 503 or probe.code not in allowed):
                v.fail(
                    "5xx that is not a database_unavailable problem",
                    f"probe of {probe.service} {PROBES[probe.path]}: {status} {probe.code}",
                )
            if probe.seconds > HANG_SECONDS:
                v.fail(
                    "request hung while PostgreSQL restarted",
                    f"probe of {probe.service} {PROBES[probe.path]}: {probe.seconds:.1f}s",
                )
        outage: dict[str, Any] = {}
        for fault in (f for f in self.run.faults if f.kind == "postgres_restart"):
            outage = self.outage(fault)
        return {
            "5xx": dict(statuses.most_common()),
            "connection_errors": len(problems["conn_error"]),
            "timeouts": len(problems["timeout"]),
            "postgres_outage": outage,
        }

    def outage(self, fault: Fault) -> dict[str, Any]:
        """While PostgreSQL was stopped, each service answered both probes 503 problem+json
        `database_unavailable`, and every probe sent and answered then did; no probe of the
        restart was slow; after, each service answered both 200 by itself."""
        v = self.v
        down = [p for p in self.run.probes if fault.started <= p.sent <= fault.ended]
        stopped, starting = fault.detail["away"]
        away = [p for p in down if p.within(stopped, starting)]
        answers_503: dict[str, dict[str, int]] = {}
        for service in self.run.services:
            mine = [p for p in away if p.service == service.name]
            answers_503[service.name] = counts = {
                path: sum(
                    1 for p in mine if p.path == path and p.status == 503 and p.code == UNAVAILABLE
                )
                for path in PROBES
            }
            for path, count in counts.items():
                if count == 0:
                    seen = Counter(f"{p.status} {p.code}" for p in mine if p.path == path)
                    v.fail(
                        "no 503 database_unavailable from a service while PostgreSQL was down",
                        f"{service.name} {PROBES[path]}: {dict(seen)}",
                    )
        for probe in away:
            if probe.status != 503 or probe.code != UNAVAILABLE:
                v.fail(
                    "a probe answered while PostgreSQL was stopped",
                    f"{probe.service} {PROBES[probe.path]}: {probe.status} {probe.code}",
                )
        for probe in down:
            if probe.seconds > FAIL_FAST_SECONDS:
                v.fail(
                    f"probe slower than {FAIL_FAST_SECONDS}s while PostgreSQL was down",
                    f"{probe.service} {PROBES[probe.path]}: {probe.seconds:.3f}s,"
                    f" {probe.status} {probe.code}",
                )
        recovered = fault.detail["recovered_seconds"]
        for service in self.run.services:
            if service.name not in recovered:
                v.fail(
                    "service did not recover after PostgreSQL came back",
                    f"{service.name}: /v1/jobs and /readyz not both answered 200"
                    f" within {RECOVERY_TIMEOUT_SECONDS}s",
                )
        until = fault.ended + OUTAGE_GRACE_SECONDS
        clients = sum(
            1
            for r in self.ev.problems["http_5xx"]
            if r.get("code") == UNAVAILABLE and fault.started <= r["t_sent"] <= until
        )
        return {
            "restart_seconds": fault.detail["restart_seconds"],
            "stopped_seconds": round(starting - stopped, 3),
            "probes_while_down": len(away),
            "probe_503_by_service": answers_503,
            "client_503": clients,
            "slowest_probe_seconds": round(max((p.seconds for p in down), default=0.0), 3),
            "fail_fast_bound_seconds": FAIL_FAST_SECONDS,
            "slowest_probe_seconds_overall": round(
                max((p.seconds for p in self.run.probes), default=0.0), 3
            ),
            "recovered_seconds": recovered,
        }

    # ---- the faults were all injected, at the right moments ------------------------------

    def faults(self) -> dict[str, Any]:
        v, run = self.v, self.run
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for fault in run.faults:
            by_kind[fault.kind].append(fault)
        kills = by_kind["worker_sigkill"]
        mid_job = [f for f in kills if f.detail["in_flight"]]
        if len(mid_job) < 2:
            v.fail("fewer than two workers killed mid-job", str([f.detail for f in kills]))
        if not by_kind["service_sigkill"]:
            v.fail("no service was SIGKILLed", "")
        # In flight at the kill: unanswered, and committed after it (each INSERT waited
        # on the harness's uncommitted row with its key, rolled back only after the kill).
        # How many were seen waiting before the kill is only reported: on a starved
        # machine a statement can still be on its way to PostgreSQL when the wait ends.
        for fault in by_kind["service_sigkill"]:
            if fault.detail["enqueues_answered"]:
                v.fail("the service answered an enqueue before it was killed", str(fault.detail))
        reserved = {
            job_key(self.opts.run, i) for i in range(self.opts.jobs - RESERVED_JOBS, self.opts.jobs)
        }
        for fault in by_kind["service_sigkill"]:
            if fault.detail["enqueues_committed_after_crash"] != INTERRUPTED_ENQUEUES:
                v.fail(
                    f"not all {INTERRUPTED_ENQUEUES} enqueues in flight committed after the crash",
                    str(fault.detail),
                )
        committed = sum(
            f.detail["enqueues_committed_after_crash"] for f in by_kind["service_sigkill"]
        )
        # the reserved keys are sent only through the crash, and retried once after it
        retried = [r for r in self.ev.enqueued if r["key"] in reserved]
        for record in retried:
            if not record["dedup"]:
                v.fail("a retry after a crash made a new job", json.dumps(record))
        deduplicated = sum(1 for r in retried if r["dedup"])
        if deduplicated != RESERVED_JOBS:
            v.fail(
                f"retries after the crash found {deduplicated} jobs already there,"
                f" not {RESERVED_JOBS}",
                f"{len(retried)} retries answered",
            )
        if len(by_kind["rolling_restart"]) != SERVICES:
            v.fail(
                "the rolling restart did not restart every service", str(by_kind["rolling_restart"])
            )
        for fault in by_kind["forged_announcements"]:
            # a service restarted meanwhile starts its count again: any rise will do
            if not any(n > 0 for n in fault.detail["dropped"].values()):
                v.fail("no service dropped the forged announcements", str(fault.detail))
        if len(by_kind["forged_announcements"]) != 1:
            v.fail("announcements were not forged once", str(by_kind["forged_announcements"]))
        if len(by_kind["postgres_restart"]) != 1:
            v.fail("PostgreSQL was not restarted once", str(len(by_kind["postgres_restart"])))
        for fault in by_kind["postgres_restart"]:
            starts = [e.started for e in self.ev.executions]
            if not self.ev.producer_done or min(self.ev.producer_done) < fault.ended:
                v.fail("PostgreSQL restarted after a producer had finished", "")
            # work had started in the seconds before (5: a loaded CI machine's workers may
            # wait that long between leases) and went on after
            if not any(fault.started - 5 <= t <= fault.started for t in starts) or not any(
                t >= fault.ended for t in starts
            ):
                v.fail("PostgreSQL restarted while workers were idle", "")
        if not by_kind["stale_completer"]:
            v.fail("the stale completer never ran", "")
        for fault in by_kind["stale_completer"]:
            d = fault.detail
            if (d["status"], d["code"]) != (409, "lease_lost") or not d["row_unchanged"]:
                v.fail("stale completer was not refused cleanly", str(d))
        exits = [e for proc in [*run.services, *run.workers, *run.producers] for e in proc.exits]
        for gone in exits:
            if gone.how in ("sigterm", "done") and gone.returncode != 0:
                v.fail("process did not exit 0", f"{gone.name} (pid {gone.pid}): {gone.returncode}")
        for gone in run.stray_exits:
            v.fail("process died by itself", f"{gone.name} (pid {gone.pid}): {gone.returncode}")
        in_flight = [e for e in self.ev.executions if e.pid in run.killed_pids and e.end is None]
        came_back = 0
        for e in in_flight:
            if self.records.get(e.lease) is not None and self.jobs[e.job].state in (
                "succeeded",
                "failed",
            ):
                came_back += 1
            else:
                v.fail("a job a killed worker held did not come back", f"job {e.job} {e.token}")
        if not in_flight:
            v.fail("no execution was in flight in a killed worker", str([f.detail for f in kills]))
        return {
            "worker_sigkill": len(kills),
            "worker_sigkill_mid_job": len(mid_job),
            "killed_in_flight": len(in_flight),
            "killed_in_flight_came_back": came_back,
            "service_sigkill": len(by_kind["service_sigkill"]),
            "enqueues_committed_after_crash": committed,
            "retries_deduplicated": deduplicated,
            "rolling_restart": len(by_kind["rolling_restart"]),
            "rolling_restart_exit_codes": [
                f.detail["returncode"] for f in by_kind["rolling_restart"]
            ],
            "postgres_restart": len(by_kind["postgres_restart"]),
            "stale_completer": len(by_kind["stale_completer"]),
            "stale_completer_refused": sum(
                1
                for f in by_kind["stale_completer"]
                if f.detail["status"] == 409 and f.detail["row_unchanged"]
            ),
            "timeline": [
                {
                    "kind": f.kind,
                    "at": round(f.started - run.load_began, 2),
                    "seconds": round(f.ended - f.started, 2),
                    **f.detail,
                }
                for f in run.faults
            ],
        }

    # ---- the API tells the same story as the database ------------------------------------

    def api(self) -> dict[str, Any]:
        view = self.run.api_view
        for job in self.jobs.values():
            seen = view.get(job.id)
            if seen != (job.state, job.attempt, len(job.attempts)):
                self.v.fail("API and database disagree", f"job {job.id}: API {seen}")
        for job_id in view.keys() - self.jobs.keys():
            self.v.fail("API lists a job the database does not have", str(job_id))
        return {"jobs_listed": len(view)}


# ---- the report ------------------------------------------------------------------------
