"""The report a run prints: what it did, what broke."""

from __future__ import annotations

from typing import Any

from tests.processes.chaos.options import SERVICES


def causes(counter: dict[str, int]) -> str:
    return ", ".join(f"{cause} {n}" for cause, n in counter.items()) or "none"


def push(figures: dict[str, Any]) -> list[str]:
    events = figures["events"]
    return [
        f"  push        {figures['jobs']} jobs, states {figures['states']};"
        f" {figures['deliveries']} deliveries, answers {figures['answers']};"
        f" at most {figures['most_in_flight']} in flight (max_running {figures['max_running']});"
        f" {figures['duplicate_successes']} repeated successes;"
        f" {figures['retry_later_lease_expired']} 429/503 whose release was lost,"
        f" {figures['retry_later_past_timeout']} answered past the timeout",
        f"  events      {events['stored']} job events, {events['delivered']} delivered"
        f" ({events['delivered_twice_or_more']} more than once) in {events['requests']}"
        f" requests ({events['requests_refused']} refused,"
        f" {events['webhook_ids_repeated']} webhook-ids repeated)",
    ]


def lifecycle(figures: dict[str, Any]) -> list[str]:
    timeouts, snoozes, deadlines = figures["timeouts"], figures["snoozes"], figures["deadlines"]
    late = {call: n for call, n in timeouts["calls"].items() if " late " in call}
    return [
        f"  timeouts    {timeouts['jobs']} jobs, states {timeouts['states']};"
        f" {timeouts['leases']} leases, {timeouts['hung']} hung;"
        f" {timeouts['timed_out']} attempts failed as timeout; calls past the timeout: {late}"
        f" (a refused call was sent at most {timeouts['refused_seconds_before_timeout']}s"
        " before its timeout: answered after it); attempts meant to finish in time that"
        f" timed out: {timeouts['late']}, {timeouts['failed_by_load']} jobs failed so",
        f"  snoozes     {snoozes['jobs']} jobs, states {snoozes['states']}; {snoozes['snoozes']}"
        f" snoozes (answers {snoozes['answers']});"
        f" {snoozes['succeeded_on_first_attempt']} succeeded on attempt 1",
        f"  deadlines   {deadlines['jobs']} jobs, {deadlines['pauses']} pauses; ends"
        f" {deadlines['ends']}; expired {deadlines['expired_unleased']} never leased,"
        f" {deadlines['expired_after_a_lease']} after a lost lease",
    ]


def report(summary: dict[str, Any]) -> str:
    f = summary["figures"]
    jobs, prod, ex, faults = f["jobs"], f["producers"], f["executions"], f["faults"]
    reaper, http = f["reaper"], f["http"]
    outage = http["postgres_outage"]
    probe_503 = ", ".join(
        f"{name} {counts['jobs']}/{counts['readyz']}"
        for name, counts in outage.get("probe_503_by_service", {}).items()
    )
    kills = ", ".join(
        str(t["in_flight"]) for t in faults["timeline"] if t["kind"] == "worker_sigkill"
    )
    seconds = summary["seconds"]
    lines = [
        f"jobq chaos run: {summary['jobs']} jobs, {summary['workers']} workers,"
        f" {summary['producers']} producers, {SERVICES} services; {summary['database']}"
        f" (seed {summary['seed']})",
        f"  time        {seconds['total']:.1f}s (setup {seconds['setup']:.1f}s,"
        f" load {seconds['load']:.1f}s, checks {seconds['checks']:.1f}s)",
        f"  jobs        {prod['jobs_in_db']} from {prod['keys']} keys"
        f" (+{jobs['total'] - prod['jobs_in_db']} stale-completer jobs);"
        f" states {jobs['states']}; kinds {jobs['kinds']}",
        f"  producers   answers {prod['answers']}, {prod['deduplicated_answers']} retries found"
        f" their job already there (deduplicated)",
        f"  faults      worker SIGKILL x{faults['worker_sigkill']} (in flight: {kills});"
        f" service SIGKILL x{faults['service_sigkill']} ({faults['enqueues_committed_after_crash']}"
        f" enqueues committed after the crash; their retries found"
        f" {faults['retries_deduplicated']} jobs already there); rolling SIGTERM restart"
        f" x{faults['rolling_restart']} (exit codes {faults['rolling_restart_exit_codes']});"
        f" PostgreSQL fast restart x{faults['postgres_restart']};"
        f" stale completer x{faults['stale_completer']}"
        f" ({faults['stale_completer_refused']} refused 409, row unchanged)",
        f"  postgres    restart took {outage.get('restart_seconds')}s, stopped for"
        f" {outage.get('stopped_seconds')}s; meanwhile probes answered 503"
        f" database_unavailable (/v1/jobs, /readyz)"
        f" {probe_503 or 'never'}, slowest {outage.get('slowest_probe_seconds')}s"
        f" (bound {outage.get('fail_fast_bound_seconds')}s; slowest of the whole restart"
        f" {outage.get('slowest_probe_seconds_overall')}s); clients got"
        f" {outage.get('client_503')} 503s; both 200 again after"
        f" {outage.get('recovered_seconds')}",
        f"  executions  {ex['total']} ({ex['needed']} needed by the scripts;"
        f" {ex['wasted']} lost their lease: {causes(ex['wasted_by_cause'])});"
        f" {ex['leases_never_received']} leases never reached a worker",
        f"  duplicates  {ex['duplicates']} extra successful runs of a job, by cause:"
        f" {causes(ex['duplicates_by_cause'])}",
        f"  killed      {faults['killed_in_flight']} executions in flight in killed workers,"
        f" {faults['killed_in_flight_came_back']} came back and finished",
        f"  reaper      {reaper['batches']} batches on {reaper['replicas']} replicas,"
        f" {reaper['overlaps']} overlaps; {reaper['reaped_logged']} reaps logged,"
        f" {reaper['lease_expired_records']} lease_expired records"
        f" (unlogged at a crash: {reaper['unlogged_at_crash'] or 0})",
        f"  http        5xx {http['5xx'] or 0}; {http['connection_errors']} connection errors;"
        f" {http['timeouts']} hangs",
        f"  workflows   {f['workflows']['workflows']} DAGs of {f['workflows']['jobs']} jobs,"
        f" states {f['workflows']['states']}; {f['workflows']['schedules']} schedules made"
        f" {f['workflows']['ticks']} ticks; a chain {f['workflows']['deep_chain']} deep under"
        " an abandoned lease, reaped",
        f"  limited     {f['limited']['jobs']} jobs; at most {f['limited']['most_running']}"
        f" running (max_running {f['limited']['max_running']}), at most"
        f" {f['limited']['most_per_key']} per key (limit {f['limited']['per_key']}) in"
        f" {f['limited']['samples']} samples",
        *lifecycle(f["lifecycle"]),
        f"  fair        {f['fair']['jobs']} jobs ({f['fair']['flood']} of one tenant at once);"
        f" at most {f['fair']['most_running']} running (max_running"
        f" {f['fair']['max_running']}), {f['fair']['busiest_window']} leases of a tenant in a"
        f" second (limit {f['fair']['key_rate']}); median wait {f['fair']['small_wait_p50']}"
        f" s for the others, {f['fair']['flood_wait_p50']} s for the flood",
        *push(f["push"]),
        f"  lost        {f['lost']}",
    ]
    if summary["ok"]:
        lines.append("  RESULT      OK: every invariant holds")
    else:
        lines.append(f"  RESULT      FAILED: {len(summary['violations'])} invariants broken")
        for violation in summary["violations"]:
            lines.append(f"    - {violation['invariant']}: {violation['count']}")
            lines.extend(f"        {example}" for example in violation["examples"])
        lines.append(f"  logs        {summary['run_dir']}")
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------
