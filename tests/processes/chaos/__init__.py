"""A fault-injection run of jobq with real processes (see `tests.processes.chaos`).

This module is the vocabulary the harness and its processes share:

- `Script`: what a job does, encoded in its payload, so that the harness can say from
  the job alone which state it must end in and what each attempt must have reported;
- `EventLog`: a JSON-lines file written one flushed line at a time, so a SIGKILL loses
  at most the line being written;
- `Api`: an HTTP client that spreads its calls over the three services and retries on
  connection errors and 5xx answers, recording every 5xx it sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import httpx

QUEUE = "chaos"
STALE_QUEUE = "chaos-stale"  # the stale completer's jobs: no worker leases from it
FLOW_QUEUE = "chaos-flow"  # the workflow load's jobs (`chaos.workflows`)
LIMITED_QUEUE = "chaos-limited"  # the limited load's jobs (`chaos.limited`)
DEEP_QUEUE = "chaos-deep"  # a deep chain under an abandoned lease (`chaos.workflows`)
LIFECYCLE_QUEUE = "chaos-lifecycle"  # timeouts, snoozes, start deadlines (`chaos.lifecycle`)
FAIR_QUEUE = "chaos-fair"  # a fair queue with per-key limits, flooded (`chaos.fair`)
PUSH_QUEUE = "chaos-push"  # pushed to an endpoint that fails at random (`chaos.push`)
# the harness's own loads, checked apart
SIDE_QUEUES = [FLOW_QUEUE, LIMITED_QUEUE, DEEP_QUEUE, LIFECYCLE_QUEUE, FAIR_QUEUE, PUSH_QUEUE]
LEASE_SECONDS = 2
HEARTBEAT_SECONDS = 0.5
MAX_ATTEMPTS = 25  # lease expiries count as attempts: room for many faults per job
REQUEST_TIMEOUT_SECONDS = 10.0  # an answer slower than this counts as a hang
CONNECT_TIMEOUT_SECONDS = 2.0
RETRY_BASE_SECONDS = 0.05
RETRY_CAP_SECONDS = 0.5
GIVE_UP_SECONDS = 90.0

Kind = Literal["ok", "flaky", "fatal", "slow"]
Plan = Literal["complete", "fail", "fatal"]
KIND_WEIGHTS: dict[Kind, int] = {"ok": 70, "flaky": 15, "fatal": 10, "slow": 5}


@dataclass(frozen=True, slots=True)
class Script:
    """What a job does when it runs: succeed, fail a few times first, fail for good, or
    work longer than its lease while heartbeating."""

    kind: Kind
    fail_times: int = 0
    sleep: float = 0.0

    @classmethod
    def for_index(cls, seed: int, index: int) -> Script:
        """The script of job number `index` of a run: the same for everyone who asks."""
        rng = random.Random(f"{seed}:{index}")
        kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
        if kind == "flaky":
            return cls(kind, fail_times=rng.randint(1, 3))
        if kind == "slow":
            return cls(kind, sleep=round(rng.uniform(2.2, 3.2), 2))
        return cls(kind)

    @classmethod
    def from_payload(cls, payload: Any) -> Script:
        return cls(payload["kind"], int(payload["fail_times"]), float(payload["sleep"]))

    def payload(self, index: int) -> dict[str, Any]:
        return {"kind": self.kind, "fail_times": self.fail_times, "sleep": self.sleep, "n": index}

    def plan(self, attempt: int) -> Plan:
        """What the handler reports on this attempt (attempts count from 1)."""
        if self.kind == "fatal":
            return "fatal"
        if self.kind == "flaky" and attempt <= self.fail_times:
            return "fail"
        return "complete"

    @property
    def final_state(self) -> Literal["succeeded", "failed"]:
        return "failed" if self.kind == "fatal" else "succeeded"


def plan_outcome(plan: Plan) -> Literal["succeeded", "failed"]:
    """The attempt record a plan leaves when its call is accepted."""
    return "succeeded" if plan == "complete" else "failed"


def job_key(run: str, index: int) -> str:
    """The idempotency key of job number `index` of a run."""
    return f"{run}-{index}"


def key_index(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


class EventLog:
    """Append-only JSON lines; each line reaches the OS before `write` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("a", buffering=1, encoding="utf-8")

    def write(self, ev: str, **fields: Any) -> None:
        record = {"ev": ev, "t": time.time(), "pid": os.getpid(), **fields}
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The records of an event log; a torn last line (the writer was killed) is skipped."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):
                record = json.loads(line)
                if isinstance(record, dict):
                    yield record


def problem_code(response: httpx.Response) -> str | None:
    """The `code` of a problem+json answer, else None."""
    if not response.headers.get("content-type", "").startswith("application/problem+json"):
        return None
    with contextlib.suppress(ValueError):
        body = response.json()
        code = body.get("code") if isinstance(body, dict) else None
        if isinstance(code, str):
            return code
    return None


class GaveUp(Exception):
    """A call kept failing for `GIVE_UP_SECONDS`."""


class Api:
    """jobq's HTTP API over several services: each try goes to a random one.

    Connection errors, timeouts and 5xx answers are retried with a short backoff (and
    recorded in the event log: the harness checks them); anything else is the answer.
    """

    def __init__(self, services: Sequence[str], events: EventLog, *, role: str) -> None:
        self.services = list(services)
        self.events = events
        self.role = role
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(REQUEST_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def once(
        self,
        op: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> httpx.Response | None:
        """One try: the answer, or None after a connection error, timeout or 5xx."""
        base = random.choice(self.services)
        sent = time.time()
        try:
            response = await self.client.request(method, base + path, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            self.events.write(
                "timeout", role=self.role, op=op, base=base, t_sent=sent, error=type(exc).__name__
            )
            return None
        except httpx.TransportError as exc:
            self.events.write(
                "conn_error",
                role=self.role,
                op=op,
                base=base,
                t_sent=sent,
                error=type(exc).__name__,
            )
            return None
        if response.status_code >= 500:
            self.events.write(
                "http_5xx",
                role=self.role,
                op=op,
                base=base,
                t_sent=sent,
                status=response.status_code,
                code=problem_code(response),
                elapsed=time.time() - sent,
            )
            return None
        return response

    async def call(
        self,
        op: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> tuple[httpx.Response, float]:
        """Try until an answer below 500: (the answer, when its request was sent)."""
        deadline = time.monotonic() + GIVE_UP_SECONDS
        delay = RETRY_BASE_SECONDS
        while True:
            sent = time.time()
            response = await self.once(op, path, body, headers=headers, method=method)
            if response is not None:
                return response, sent
            if time.monotonic() > deadline:
                self.events.write("gave_up", role=self.role, op=op, path=path)
                raise GaveUp(f"{op} {path}")
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, RETRY_CAP_SECONDS)
