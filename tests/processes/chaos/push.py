"""The push load: a pushed queue (`PUSH_QUEUE`, `max_running` `MAX_RUNNING`) whose jobs
jobq POSTs to an endpoint of the harness's own, and a subscription to its events, through
the same faults (replica SIGKILLs, rolling restarts, a PostgreSQL restart).

The endpoint is an asyncio HTTP server in the harness process on loopback (the replicas
die around it, it does not), with two paths:

- `/jobs`, the queue's target: it verifies each delivery's Standard Webhooks signature,
  records it (`Delivery`: job, attempt, lease, webhook-id, when it began and ended, the
  answer) and answers at random: 200 with a result; 202, then completes the job a moment
  later with the lease id through the ordinary API; 429 or 503 with `Retry-After`; 500;
  a hang past the target's timeout; or it closes the connection. Jobs of the `doomed`
  plan (`max_attempts` `DOOMED_ATTEMPTS`) always get a failure, and fail for good.
- `/events`, the subscription's target: verifies and records each batch (`Batch`), and
  answers 200, or at random 500 or 503 with `Retry-After` (the batch comes again).

A delivery's recorded span lies within its job's running time, so that the spans in
flight at once are a lower bound of the running jobs: it begins once the request is
read, and ends before the answer is written (or, for a hang, when the dispatcher gave
up and closed the connection; for a 202, when the completing call that was accepted
was sent). A request's start is taken one loop turn late, so a connection closed by a
timeout that the loop noticed together with the next request ends first.

The invariants are `checks_push.check_push`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

from tests.delivery_endpoint import Answer, Received, exchange
from tests.processes.chaos import PUSH_QUEUE, Api, GaveUp
from tests.processes.chaos.databases import Db

MAX_RUNNING = 4
PUSH_JOBS = 150
BATCH = 15  # enqueued at once, so that the limit binds
MAX_ATTEMPTS = 20
DOOMED_ATTEMPTS = 2
DOOMED_SHARE = 0.1
TIMEOUT_SECONDS = 2.0  # the target's; a hang outlasts it (a starved harness may too)
HANG_SECONDS = 5.0  # a hang ends at the latest then (the dispatcher closes first)
LATER_SECONDS = (0.05, 0.3)  # a 202's job is completed this long after
WORK_SECONDS = (0.05, 0.2)  # what a 200 or 500 "works" first: a batch fills the limit
SUBSCRIPTION = "chaos-push"
SECRET = "whsec_" + "Y2hhb3MtcHVzaC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZg=="  # 40 bytes
ANSWERS = {  # (weight): what `/jobs` answers a job that may succeed
    "ok": 50,
    "accepted": 15,
    "busy": 8,  # 429 with Retry-After
    "unavailable": 7,  # 503 with Retry-After
    "error": 10,
    "hang": 4,
    "close": 6,
}
FAILURES = ("error", "hang", "close")
EVENT_ANSWERS = {"ok": 80, "error": 10, "unavailable": 10}
STATUS = {"ok": 200, "accepted": 202, "busy": 429, "unavailable": 503, "error": 500}


@dataclass(slots=True)
class Delivery:
    """One request to `/jobs`, as the endpoint saw it."""

    job: int
    attempt: int
    lease: str
    webhook_id: str
    signed: bool
    began: float
    answer: str = ""
    ended: float | None = None  # None: it never ended (a bug of the harness)
    completed: int | None = None  # a 202's completing call: its status


@dataclass(slots=True)
class Batch:
    """One request to `/events`."""

    webhook_id: str
    signed: bool
    at: float
    status: int
    events: list[dict[str, Any]]


@dataclass
class PushLoad:
    api: Api
    db: Db
    seed: int
    duration: float
    port: int = 0
    keys: dict[str, bool] = field(default_factory=dict)  # enqueued key → doomed
    deliveries: list[Delivery] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    pending: set[asyncio.Task[None]] = field(default_factory=set)  # the 202s' completions
    submitted: bool = False
    server: asyncio.Server | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.seed}:push")
        self.verifier = Webhook(SECRET)
        self.closing = asyncio.Event()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen (before the load: the services' allowlist names loopback)."""
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.closing.set()
        for task in self.pending:
            task.cancel()
        if self.server is not None:
            self.server.close()

    async def run(self) -> None:
        await self.put(
            f"/v1/queues/{PUSH_QUEUE}/settings",
            {
                "push": {
                    "url": f"{self.base}/jobs",
                    "secrets": [SECRET],
                    "timeout_seconds": TIMEOUT_SECONDS,
                },
                "max_running": MAX_RUNNING,
            },
        )
        await self.put(
            f"/v1/subscriptions/{SUBSCRIPTION}",
            {"url": f"{self.base}/events", "queues": [PUSH_QUEUE], "secrets": [SECRET]},
        )
        began = time.monotonic()
        for start in range(0, PUSH_JOBS, BATCH):
            jobs: list[dict[str, Any]] = []
            doomed_keys: dict[str, bool] = {}
            for i in range(start, min(start + BATCH, PUSH_JOBS)):
                doomed = random.Random(f"{self.seed}:push:{i}").random() < DOOMED_SHARE
                doomed_keys[f"push-{i}"] = doomed
                jobs.append(
                    {
                        "type": "push.step",
                        "payload": {"n": i, "doomed": doomed},
                        "idempotency_key": f"push-{i}",
                        "max_attempts": DOOMED_ATTEMPTS if doomed else MAX_ATTEMPTS,
                    }
                )
            response, _ = await self.api.call(
                "push_enqueue", f"/v1/queues/{PUSH_QUEUE}/jobs/batch", {"jobs": jobs}
            )
            if response.status_code != 201:
                raise AssertionError(f"push enqueue: {response.status_code} {response.text}")
            self.keys.update(doomed_keys)
            pace = began + self.duration * (start + BATCH) / PUSH_JOBS - time.monotonic()
            await asyncio.sleep(max(0.0, pace))
        self.submitted = True

    async def put(self, path: str, body: dict[str, Any]) -> None:
        response, _ = await self.api.call("push_setup", path, body, method="PUT")
        if response.status_code not in (200, 201):
            raise AssertionError(f"PUT {path}: {response.status_code} {response.text}")

    async def done(self) -> bool:
        """Every job finished, no 202 left to complete, every event of the queue stamped
        and past the subscription's cursor."""
        if not self.submitted or self.pending:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT (SELECT count(*) FROM jobq.jobs WHERE queue = $1"
            "         AND state IN ('waiting', 'queued', 'running')) AS open,"
            "       (SELECT count(*) FROM jobq.job_events WHERE queue = $1"
            "         AND position IS NULL) AS unstamped,"
            "       (SELECT coalesce(max(position), 0) FROM jobq.job_events"
            "         WHERE queue = $1) AS last,"
            "       (SELECT position FROM jobq.event_subscriptions WHERE name = $2) AS cursor",
            PUSH_QUEUE,
            SUBSCRIPTION,
        )
        if rows is None:
            return False
        row = rows[0]
        return bool(row["open"] == 0 and row["unstamped"] == 0 and row["cursor"] >= row["last"])

    # ---- the endpoint ----------------------------------------------------------------

    def signed(self, body: bytes, headers: dict[str, str]) -> bool:
        try:
            self.verifier.verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    async def on_job(self, headers: dict[str, str], body: bytes, reader: Any) -> Answer:
        await asyncio.sleep(0)  # see the docstring: a close noticed with it ends first
        await asyncio.sleep(0)
        envelope = json.loads(body)
        got = Delivery(
            envelope["job_id"],
            envelope["attempt"],
            envelope["lease_id"],
            headers.get("webhook-id", ""),
            self.signed(body, headers),
            time.time(),
        )
        self.deliveries.append(got)
        if envelope["payload"]["doomed"]:
            answer = self.rng.choice(FAILURES)
        else:
            answer = self.rng.choices(list(ANSWERS), weights=list(ANSWERS.values()))[0]
        got.answer = answer
        if answer == "hang":
            with contextlib.suppress(TimeoutError, ConnectionError):
                async with asyncio.timeout(HANG_SECONDS):
                    await reader.read(1)  # b"": the dispatcher gave up and closed
            got.ended = time.time()
            return None
        if answer == "close":
            got.ended = time.time()
            return None
        if answer == "accepted":
            task = asyncio.create_task(self.complete_later(got))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
            return 202, {}, b""
        await asyncio.sleep(self.rng.uniform(*WORK_SECONDS))
        got.ended = time.time()
        status = STATUS[answer]
        if status in (429, 503):
            return status, {"retry-after": self.rng.choice(("0", "1"))}, b"later"
        if status == 500:
            return 500, {}, b"boom"
        result = {"job": got.job, "attempt": got.attempt, "lease": got.lease}
        return 200, {"content-type": "application/json"}, json.dumps(result).encode()

    async def complete_later(self, got: Delivery) -> None:
        await asyncio.sleep(self.rng.uniform(*LATER_SECONDS))
        result = {"job": got.job, "attempt": got.attempt, "lease": got.lease, "later": True}
        try:
            response, sent = await self.api.call(
                "push_complete", f"/v1/leases/{got.lease}/complete", {"result": result}
            )
        except GaveUp:
            return
        got.completed = response.status_code
        got.ended = sent if response.status_code == 200 else time.time()

    def on_events(self, headers: dict[str, str], body: bytes) -> Answer:
        answer = self.rng.choices(list(EVENT_ANSWERS), weights=list(EVENT_ANSWERS.values()))[0]
        status = STATUS[answer]
        self.batches.append(
            Batch(
                headers.get("webhook-id", ""),
                self.signed(body, headers),
                time.time(),
                status,
                json.loads(body)["events"],
            )
        )
        if status == 503:
            return 503, {"retry-after": "0"}, b"later"
        return status, {}, b"{}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await exchange(reader, writer, self.respond, self.closing)

    async def respond(self, got: Received) -> Answer:
        if got.path == "/jobs":
            assert got.reader is not None
            return await self.on_job(got.headers, got.body, got.reader)
        if got.path == "/events":
            return self.on_events(got.headers, got.body)
        return 404, {}, b""
