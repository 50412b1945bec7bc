"""A chaos worker process: leases jobs, runs each job's script, logs every execution.

    python -m tests.processes.chaos.worker --services URL[,URL...] --events PATH --name NAME

Each lease call goes to a random service and asks for 10 to 50 jobs with a short
lease. Every handler execution is logged before it runs (`start`: job, lease token,
attempt, plan) and once its outcome is known (`end`: what was sent, the HTTP status
received), one flushed JSON line each. Fast jobs run one after another and are acked
either in one `/v1/acks` call or one call per job; slow jobs run alongside, heartbeat
every half second and stop at the first 409 (their lease is gone). SIGTERM: stop
leasing, finish what is in hand, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.processes.chaos import (
    HEARTBEAT_SECONDS,
    LEASE_SECONDS,
    QUEUE,
    Api,
    EventLog,
    GaveUp,
    Plan,
    Script,
    problem_code,
)

MIN_LEASE_BATCH = 10
MAX_LEASE_BATCH = 50
MAX_SLOW_IN_FLIGHT = 40
WORK_SECONDS = (0.002, 0.02)  # what a fast handler "works", one job after another
IDLE_SECONDS = (0.05, 0.15)
ACKS_BATCH_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Execution:
    """One run of a job's handler, under one lease."""

    job_id: int
    lease: str
    attempt: int
    script: Script
    plan: Plan


class Worker:
    def __init__(self, api: Api, events: EventLog, name: str, rng: random.Random) -> None:
        self.api = api
        self.events = events
        self.name = name
        self.rng = rng
        self.stopping = asyncio.Event()
        self.slow: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        while not self.stopping.is_set():
            if len(self.slow) >= MAX_SLOW_IN_FLIGHT:
                await asyncio.sleep(0.05)
                continue
            leases = await self.lease()
            if leases is None:
                continue
            if not leases:
                await asyncio.sleep(self.rng.uniform(*IDLE_SECONDS))
                continue
            fast = []
            for execution in [self.start(lease) for lease in leases]:
                if execution.script.kind == "slow":
                    task = asyncio.create_task(self.run_slow(execution))
                    self.slow.add(task)
                    task.add_done_callback(self.slow.discard)
                else:
                    fast.append(execution)
            for _ in fast:
                await asyncio.sleep(self.rng.uniform(*WORK_SECONDS))
            if fast:
                await self.finish(fast)
        await asyncio.gather(*self.slow)

    async def lease(self) -> list[dict[str, Any]] | None:
        body = {
            "queues": [QUEUE],
            "max_jobs": self.rng.randint(MIN_LEASE_BATCH, MAX_LEASE_BATCH),
            "lease_seconds": LEASE_SECONDS,
            "worker_id": self.name,
        }
        try:
            response, _ = await self.api.call("lease", "/v1/leases", body)
        except GaveUp:
            return None
        if response.status_code != 200:
            self.unexpected("lease", response)
            await asyncio.sleep(0.5)
            return None
        leases: list[dict[str, Any]] = response.json()["leases"]
        return leases

    def start(self, lease: dict[str, Any]) -> Execution:
        job = lease["job"]
        script = Script.from_payload(job["payload"])
        execution = Execution(
            job["id"], lease["lease_id"], job["attempt"], script, script.plan(job["attempt"])
        )
        self.events.write(
            "start",
            worker=self.name,
            job=execution.job_id,
            lease=execution.lease,
            attempt=execution.attempt,
            kind=script.kind,
            plan=execution.plan,
        )
        return execution

    def end(
        self,
        execution: Execution,
        op: str,
        via: str,
        status: int | None,
        code: str | None,
        sent: float | None,
    ) -> None:
        self.events.write(
            "end",
            worker=self.name,
            job=execution.job_id,
            lease=execution.lease,
            attempt=execution.attempt,
            plan=execution.plan,
            op=op,
            via=via,
            status=status,
            code=code,
            t_sent=sent,
        )

    def unexpected(self, op: str, response: Any) -> None:
        self.events.write(
            "unexpected", op=op, status=response.status_code, body=response.text[:500]
        )

    # ---- acknowledging -----------------------------------------------------------

    def ack_body(self, execution: Execution) -> dict[str, Any]:
        if execution.plan == "complete":
            return {
                "result": {
                    "lease": execution.lease,
                    "attempt": execution.attempt,
                    "worker": self.name,
                }
            }
        if execution.plan == "fail":
            return {
                "error": {
                    "type": "Flaky",
                    "message": f"attempt {execution.attempt} of {execution.script.fail_times}",
                },
                "retryable": True,
                "retry_after_seconds": round(self.rng.uniform(0.02, 0.2), 3),
            }
        return {
            "error": {"type": "Fatal", "message": "this job never succeeds"},
            "retryable": False,
        }

    @staticmethod
    def op(execution: Execution) -> str:
        return "complete" if execution.plan == "complete" else "fail"

    async def finish(self, executions: list[Execution]) -> None:
        if self.rng.random() < ACKS_BATCH_SHARE:
            await self.finish_batch(executions)
        else:
            await asyncio.gather(*(self.finish_one(e) for e in executions))

    async def finish_one(self, execution: Execution) -> None:
        op = self.op(execution)
        path = f"/v1/leases/{execution.lease}/{op}"
        try:
            response, sent = await self.api.call(op, path, self.ack_body(execution))
        except GaveUp:
            self.end(execution, op, "single", None, None, None)
            return
        self.end(execution, op, "single", response.status_code, problem_code(response), sent)

    async def finish_batch(self, executions: list[Execution]) -> None:
        acks = [
            {"lease_id": e.lease, "outcome": self.op(e), **self.ack_body(e)} for e in executions
        ]
        try:
            response, sent = await self.api.call("acks", "/v1/acks", {"acks": acks})
        except GaveUp:
            for execution in executions:
                self.end(execution, self.op(execution), "acks", None, None, None)
            return
        if response.status_code != 200:
            self.unexpected("acks", response)
            for execution in executions:
                self.end(
                    execution,
                    self.op(execution),
                    "acks",
                    response.status_code,
                    problem_code(response),
                    sent,
                )
            return
        results = response.json()["results"]
        for execution, result in zip(executions, results, strict=True):
            self.end(execution, self.op(execution), "acks", result["status"], result["code"], sent)

    # ---- slow jobs ---------------------------------------------------------------

    async def run_slow(self, execution: Execution) -> None:
        """Work longer than the lease, heartbeating; give up at the first 409."""
        began = time.monotonic()
        ends = began + execution.script.sleep
        while (left := ends - time.monotonic()) > 0:
            await asyncio.sleep(min(HEARTBEAT_SECONDS, left))
            if time.monotonic() >= ends:
                break
            percent = min(100.0, 100 * (time.monotonic() - began) / execution.script.sleep)
            sent = time.time()
            response = await self.api.once(
                "heartbeat",
                f"/v1/leases/{execution.lease}/heartbeat",
                {"progress": {"percent": round(percent, 1), "stage": "working"}},
            )
            if response is None:  # recorded; the next beat tries again
                continue
            code = problem_code(response)
            self.events.write(
                "hb",
                job=execution.job_id,
                lease=execution.lease,
                t_sent=sent,
                status=response.status_code,
                code=code,
            )
            if response.status_code == 409:
                self.end(execution, "heartbeat", "single", 409, code, sent)
                return
            if response.status_code != 200:
                self.unexpected("heartbeat", response)
        if self.rng.random() < ACKS_BATCH_SHARE:
            await self.finish_batch([execution])
        else:
            await self.finish_one(execution)


async def main_async(args: argparse.Namespace) -> int:
    events = EventLog(args.events)
    api = Api(args.services.split(","), events, role="worker")
    name = f"{args.name}-{os.getpid()}"
    worker = Worker(api, events, name, random.Random())
    loop = asyncio.get_running_loop()
    for stop in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(stop, worker.stopping.set)
    events.write("hello", worker=name)
    try:
        await worker.run()
    finally:
        await api.aclose()
        events.write("bye", worker=name)
        events.close()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", required=True, help="comma-separated base URLs")
    parser.add_argument("--events", type=Path, required=True, help="JSON-lines event log")
    parser.add_argument("--name", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
