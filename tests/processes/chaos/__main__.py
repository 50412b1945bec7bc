"""The fault-injection run: real PostgreSQL, three `jobq serve`, workers, producers, faults.

    python -m tests.processes.chaos [--jobs N | --big] [--workers K] [--producers P]
                                   [--json PATH] [--run-dir DIR] [--keep] [--seed S]
                                   [--pg-stop-cmd CMD --pg-start-cmd CMD]

Without `JOBQ_DATABASE_URL` it starts an embedded PostgreSQL of its own in the run
directory (never the one the tests or `jobq serve` use), so it may restart it; with it,
it works in a database `jobq_chaos` on that server, and stops and starts the Debian
cluster serving that port (`pg_lsclusters`), or runs `--pg-stop-cmd` and `--pg-start-cmd`.

While producers enqueue N jobs (a mix of jobs that succeed, fail retryably a few times,
fail for good, or outlive their lease while heartbeating) and workers run them, a
timeline injects faults: workers SIGKILLed mid-job, one service SIGKILLed and started
again, all three services restarted one after another with SIGTERM, PostgreSQL
restarted (fast shutdown), and a stale completer finishing a lease after the reaper
took it. The service SIGKILL lands while two enqueues it took wait in PostgreSQL (on
an uncommitted job of the harness's holding the same idempotency keys), so they commit
after their service died; the retries with the same keys must find those jobs.

Then every invariant is checked from the database, the API, the processes' event logs
and the services' logs (`Checks`):

- accounted for: the N keys, the answers the producers got (key → id) and the jobs in
  the database match one to one, each job with the payload it was sent;
- finished as scripted: every job succeeded or failed as its script says, and every
  succeeded/failed attempt record is what the script says for that attempt number;
- history: attempts 1..n, one record per lease, nothing after a final outcome, at most
  one `succeeded`, the result written by the lease that succeeded;
- executions: every handler run the workers logged has its lease recorded, with the
  attempt number the worker saw; every succeeded/failed record was run by exactly one
  execution that sent that outcome and got 200; every other execution's lease expired
  and the run knows why (worker SIGKILLed, ack or heartbeat answered 409 lease_lost, the
  stale completer): these are the duplicates, counted by cause;
- superseded leases: no finishing call answered 200 on a lease recorded as expired, no
  heartbeat accepted after its lease's record was written; the stale completer gets
  409 lease_lost and the job's row is unchanged;
- reaper: at least one batch logged; batches of two replicas never overlap in time;
  every lease_expired record is a logged reap, except one stamped during a service
  SIGKILL, a SIGTERM restart or the PostgreSQL restart (± `STOP_SLACK_SECONDS`, and up
  to `REAP_LOG_SECONDS` before it: the record carries the reap's transaction start): a
  reap committed just before its process stopped may lose its log line, even on a
  graceful stop;
- HTTP: no 500, every 5xx a 503 problem+json `database_unavailable` (`/readyz` may also
  say `reaper_stalled`), no request hung; while PostgreSQL was stopped (it stays stopped
  until every service has answered both probes 503, at most `OUTAGE_HOLD_SECONDS`),
  each service answered both `/v1/jobs` and `/readyz` probes 503 `database_unavailable`
  and no other answer; no probe of the restart took over `FAIL_FAST_SECONDS`;
  afterwards each service answered both 200 by itself;
- faults: every fault was injected as planned (workers killed mid-job, and every
  execution in flight in them came back and finished; both interrupted enqueues
  committed after their service died, and the retries of all `RESERVED_JOBS` keys found
  their jobs; three services restarted; one PostgreSQL restart under load);
- processes: SIGTERM exits 0, nothing dies unless killed; the API lists every job with
  the state and attempts the database has; all four kinds of job were enqueued, and
  there were at least as many handler runs as finished attempts;
- workflows (`workflows`): DAGs of dependent jobs and backdated cron schedules made all
  through the faults: every tick of each schedule enqueued once, none lost; no child
  leased before its parents finished (by the harness's clock); every workflow job ends
  as its DAG says (a child of a failed parent cancelled, naming it), none left waiting;
- limits (`limited`): a queue with `max_running` 4 and `max_running_per_key` 1, leased
  by more workers than that through the faults: sampled every 20 ms, never more running
  than its limits, the limit reached, every job succeeded;
- lifecycle (`lifecycle`): jobs with an execution timeout, some of whose attempts hang
  past it while heartbeating; jobs snoozed a few times; jobs with a start deadline, some
  enqueued into a paused queue or due after it: every hung attempt failed by the reaper
  as `timeout`, no call on a lease accepted past its timeout, no attempt completed past
  it; snoozes counted, spending no attempt, each job succeeding once; no job leased
  after its `start_by`, every one never leased `cancelled` as `expired`; none lost;
- fair (`fair`): a fair queue with `max_running` and `rate_limit_per_key`, one tenant's
  flood at once and three tenants enqueueing steadily: never more running than the
  limit, no tenant above its rate in any window, the others' median wait under half the
  flood's, every job succeeded;
- push (`push`, `checks_push`): a pushed queue with `max_running` 4, delivered to an
  endpoint of the harness that answers at random (200, 202 then complete, 429/503 with
  Retry-After, 500, a hang past the timeout, a closed connection), and a subscription
  to its events: every job delivered, finished once (succeeded once, or failed for good
  on its last attempt), never more in flight than the limit, no attempt spent by a
  429/503, every job event delivered in order per job, every request signed validly.

Exit status 1 when any invariant breaks, 2 when the run itself could not be carried out.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from tests.processes.chaos import SIDE_QUEUES, GaveUp
from tests.processes.chaos.checks import Checks
from tests.processes.chaos.checks_lifecycle import check_lifecycle
from tests.processes.chaos.checks_push import check_push
from tests.processes.chaos.databases import drop
from tests.processes.chaos.evidence import gather_evidence, load_jobs
from tests.processes.chaos.fair import check_fair
from tests.processes.chaos.limited import check_limited
from tests.processes.chaos.options import PG_DIRNAME, HarnessError, Options, parse_args, say
from tests.processes.chaos.report import report
from tests.processes.chaos.run import Run
from tests.processes.chaos.statistics import check_statistics
from tests.processes.chaos.verdict import Verdict
from tests.processes.chaos.workflows import check_workflows


async def execute(opts: Options) -> int:
    run_dir = opts.run_dir or Path(tempfile.mkdtemp(prefix="jobq-chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"jobq chaos: {opts.jobs} jobs, seed {opts.seed}, run dir {run_dir}")
    run = Run(opts, run_dir)
    began = time.time()
    main_task = asyncio.current_task()
    assert main_task is not None  # SIGTERM, like Ctrl-C, ends the run through its teardown
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        await run.setup()
        setup_done = time.time()
        await run.load()
        await run.read_api()
        await run.stop_services()
        assert run.db is not None
        jobs = await load_jobs(run.db)
        assert run.flows is not None and run.limited is not None and run.lifecycle is not None
        assert run.fair is not None and run.push is not None
        side_verdict = Verdict()
        flow_figures = await check_workflows(run.flows, run.db, side_verdict)
        limited_figures = await check_limited(run.limited, run.db, side_verdict)
        lifecycle_figures = await check_lifecycle(run.lifecycle, run.db, side_verdict)
        fair_figures = await check_fair(run.fair, run.db, side_verdict)
        push_figures = await check_push(run.push, run.db, side_verdict)
        statistics_figures = await check_statistics(run.db, side_verdict)
        side = await run.db.fetch("SELECT id FROM jobq.jobs WHERE queue = ANY($1)", SIDE_QUEUES)
        run.side_ids = {r["id"] for r in side}
    except (
        HarnessError,
        GaveUp,
        OSError,
        asyncpg.PostgresError,
        subprocess.SubprocessError,
    ) as exc:
        say(f"the run could not be carried out: {type(exc).__name__}: {exc}")
        say(f"logs: {run_dir}")
        return 2
    finally:
        await run.teardown()
    load_done = time.time()
    checks = Checks(run, gather_evidence(run_dir, jobs))
    figures = checks.all()
    figures["workflows"] = flow_figures
    figures["limited"] = limited_figures
    figures["lifecycle"] = lifecycle_figures
    figures["fair"] = fair_figures
    figures["push"] = push_figures
    figures["statistics"] = statistics_figures
    checks.v.counts.update(side_verdict.counts)
    for kind, examples in side_verdict.examples.items():
        checks.v.examples[kind].extend(examples)
    if not run.finished:
        checks.v.fail("the load did not finish in time", f"{opts.timeout:.0f}s")
    assert run.database is not None
    summary: dict[str, Any] = {
        "ok": checks.v.ok,
        "jobs": opts.jobs,
        "workers": opts.workers,
        "producers": opts.producers,
        "seed": opts.seed,
        "mode": run.database.mode,
        "database": run.database.description,
        "run_dir": str(run_dir),
        "seconds": {
            "setup": round(setup_done - began, 2),
            "load": round(run.load_ended - run.load_began, 2),
            "checks": round(time.time() - load_done, 2),
            "total": round(time.time() - began, 2),
        },
        "lost": figures["lost"],
        "figures": figures,
        "violations": checks.v.as_json(),
    }
    say("")
    say(report(summary))
    say("")
    say(
        json.dumps(
            {k: v for k, v in summary.items() if k != "figures"}
            | {
                "faults": {k: v for k, v in figures["faults"].items() if k != "timeline"},
                "executions": figures["executions"],
            }
        )
    )
    if opts.json_path is not None:
        opts.json_path.write_text(json.dumps(summary, indent=2) + "\n")
    if summary["ok"] and not opts.keep:
        if run.database.mode == "external":
            await drop(run.database.server_url)
        # a run dir of one's own keeps its logs; the database files go either way
        shutil.rmtree(run_dir if opts.run_dir is None else run_dir / PG_DIRNAME, ignore_errors=True)
    return 0 if summary["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    try:
        return asyncio.run(execute(parse_args(argv)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        say("interrupted: every process the run started is stopped")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
