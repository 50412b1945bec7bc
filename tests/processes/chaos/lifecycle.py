"""The lifecycle load: execution timeouts, snoozes and start deadlines on a queue of their
own (`LIFECYCLE_QUEUE`), through the same faults.

While the producers' window lasts (its first `SUBMIT_SHARE`), the harness enqueues
`BATCHES` batches of three kinds of job, each with its idempotency key `life-<kind>-<i>`
and a plan that follows from the seed and its index alone (`TimeoutPlan`,
`SnoozePlan`, `DeadlinePlan`), and works the queue with lease loops of its own, by type:

- `life.timeout`: `timeout_seconds` 1 or 2, leased for `LEASE_SECONDS` (longer: only the
  timeout ends an attempt). The first `hangs` attempts hang: they heartbeat past their
  timeout, then complete, fail, snooze or ack it; the later ones complete in time. Some
  hang on every attempt, and fail after their `max_attempts`.
- `life.snooze`: snoozed 1 to 3 times (0.2 to 1 s each, the lease answer's `snoozes`
  saying how many are done), then completed.
- `life.deadline`: `start_by` a little ahead, and completed when leased: `roomy` ones
  have time to spare; `tight` ones may pass theirs in a pause or a fault; `doomed` ones
  are due after it; `paused` ones are enqueued while the queue is paused (twice, for
  `PAUSE_SECONDS`), their deadline passing before it resumes.

The invariants (`checks_lifecycle.check_lifecycle`), from the database and from every
answer the lease loops got:

- timeouts: every attempt that hung was failed by the reaper as `timeout` (outcome and
  error type), no earlier than its start + `timeout_seconds`; no lease or heartbeat
  answer gave a lease an end past its `timeout_at` (the hung heartbeats ask for
  `LEASE_SECONDS` more, longer than any timeout); no call on a lease (a
  heartbeat, complete, fail, snooze, ack) sent after its `timeout_at` was accepted, each
  refused 409 `execution_timeout` (or `lease_lost`); no attempt completed past its
  timeout; every attempt not succeeded is a `timeout`; an attempt meant to finish in
  time timed out only when its lease's answer or its complete's answer came after its
  timeout (the load or a fault: counted, by cause), never when its complete was
  answered before it; each job succeeded, or failed on its last attempt with a `timeout`
  error (those that always hang, and those whose every attempt was late so);
- snoozes: each job snoozed as often as planned (`snoozes`, and as many `snoozed`
  entries), succeeded once, with an `attempt` count its snoozes did not raise, and was
  not leased again before a snooze was over;
- start deadlines: no job was leased after its `start_by` (its attempts' starts, and the
  lease calls' sending times by the harness's clock); every job never leased ended
  `cancelled` with a `last_error` of type `expired`, and every expired job was not
  leased after its deadline; roomy jobs succeeded, doomed and paused ones expired;
- none of them lost: every job enqueued is there, finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from tests.processes.chaos import LIFECYCLE_QUEUE, Api, GaveUp, problem_code
from tests.processes.chaos.databases import Db
from tests.processes.chaos.evidence import epoch

if TYPE_CHECKING:
    pass

BATCHES = 15
TIMEOUTS_PER_BATCH = 4
SNOOZES_PER_BATCH = 4
DEADLINES_PER_BATCH = 5
SUBMIT_SHARE = 0.8  # of the producers' window: the last jobs' timeouts end with the load
LEASE_SECONDS = 5  # longer than any timeout: only its timeout ends a timed attempt
MAX_ATTEMPTS = 6  # room for attempts timed out by faults
HANG_FOR_GOOD = 2  # max_attempts of the jobs that hang every time
HEARTBEAT_SECONDS = 0.3
HANG_PAST_SECONDS = 0.6  # a hung attempt heartbeats this long past its timeout
WORK_SECONDS = (0.02, 0.2)  # what an attempt in time "works"
TIMEOUT_LEASERS = 2
TIMED_IN_FLIGHT = 12  # per timeout lease loop
SNOOZE_LEASERS = 2
DEADLINE_LEASERS = 2
PAUSES = (0.3, 0.7)  # of the submission window: when the queue is paused
PAUSE_SECONDS = 1.5
PAUSED_JOBS = 4  # enqueued into each pause, due by `PAUSED_AHEAD_SECONDS`
PAUSED_AHEAD_SECONDS = 0.5
ROOMY_SECONDS = 120.0
TIGHT_SECONDS = (0.3, 2.5)
DOOMED_AHEAD_SECONDS = 1.0
DOOMED_DELAY_SECONDS = 2.0
# the final call of a hung attempt, past its timeout: every one must be refused
HUNG_CALLS = ("complete", "fail", "snooze", "acks")
REFUSED_CODES = ("execution_timeout", "lease_lost")

Group = Literal["roomy", "tight", "doomed", "paused"]


@dataclass(frozen=True, slots=True)
class TimeoutPlan:
    timeout: int
    hangs: int  # the first this many attempts hang past their timeout
    max_attempts: int

    @classmethod
    def of(cls, seed: int, index: int) -> TimeoutPlan:
        rng = random.Random(f"{seed}:life-timeout:{index}")
        timeout, draw = rng.choice((1, 2)), rng.random()
        if draw < 0.2:
            return cls(timeout, HANG_FOR_GOOD, HANG_FOR_GOOD)
        return cls(timeout, 0 if draw < 0.6 else 1, MAX_ATTEMPTS)

    @property
    def for_good(self) -> bool:
        return self.hangs >= self.max_attempts


@dataclass(frozen=True, slots=True)
class SnoozePlan:
    seconds: tuple[float, ...]  # one per snooze, in order

    @classmethod
    def of(cls, seed: int, index: int) -> SnoozePlan:
        rng = random.Random(f"{seed}:life-snooze:{index}")
        return cls(tuple(round(rng.uniform(0.2, 1.0), 2) for _ in range(rng.randint(1, 3))))


@dataclass(frozen=True, slots=True)
class DeadlinePlan:
    group: Group
    ahead: float  # start_by this long after the enqueue is sent

    @classmethod
    def of(cls, seed: int, index: int) -> DeadlinePlan:
        rng = random.Random(f"{seed}:life-deadline:{index}")
        group: Group = rng.choices(("roomy", "tight", "doomed"), weights=(3, 6, 1))[0]
        ahead = {
            "roomy": ROOMY_SECONDS,
            "tight": round(rng.uniform(*TIGHT_SECONDS), 2),
            "doomed": DOOMED_AHEAD_SECONDS,
        }[group]
        return cls(group, ahead)


def life_key(kind: str, index: int) -> str:
    return f"life-{kind}-{index}"


@dataclass(slots=True)
class Call:
    """One call on a lease and its answer; when its first try was sent and when its answer
    came (by this process's clock: a retry of a finishing call accepted before may be
    answered 200 later)."""

    op: str
    first: float
    status: int
    code: str | None
    answered: float


@dataclass(slots=True)
class Held:
    """One lease of a timed job, as its lease loop saw it."""

    job: int
    token: str
    attempt: int
    hang: bool
    timeout_at: float
    received: float  # when the lease's answer reached its loop
    calls: list[Call] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # the lease's ends the answers gave


@dataclass
class LifecycleLoad:
    api: Api
    db: Db
    seed: int
    duration: float
    keys: set[str] = field(default_factory=set)  # the jobs whose enqueue was answered
    start_by: dict[str, float] = field(default_factory=dict)  # key → the deadline sent
    groups: dict[str, Group] = field(default_factory=dict)  # key → its deadline group
    held: list[Held] = field(default_factory=list)
    snoozed: list[dict[str, Any]] = field(default_factory=list)  # each snooze call's answer
    deadline_leases: list[tuple[int, float]] = field(default_factory=list)  # job, call sent
    unexpected: list[str] = field(default_factory=list)
    pauses: int = 0
    submitted: bool = False

    async def run(self) -> None:
        loops = [
            *(self.timed_loop(f"life-timeout-{i}") for i in range(TIMEOUT_LEASERS)),
            *(self.snooze_loop(f"life-snooze-{i}") for i in range(SNOOZE_LEASERS)),
            *(self.deadline_loop(f"life-deadline-{i}") for i in range(DEADLINE_LEASERS)),
        ]
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            await asyncio.gather(self.submit(), self.pause_twice())
            self.submitted = True
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    # ---- enqueueing ----------------------------------------------------------------

    async def submit(self) -> None:
        began = time.monotonic()
        window = self.duration * SUBMIT_SHARE
        for batch in range(BATCHES):
            t, s, d = TIMEOUTS_PER_BATCH, SNOOZES_PER_BATCH, DEADLINES_PER_BATCH
            jobs = [
                *(self.timed_job(batch * t + i) for i in range(t)),
                *(self.snooze_job(batch * s + i) for i in range(s)),
                *(self.deadline_job(batch * d + i) for i in range(d)),
            ]
            await self.enqueue(jobs)
            pace = began + window * (batch + 1) / BATCHES - time.monotonic()
            await asyncio.sleep(max(0.0, pace))

    def timed_job(self, index: int) -> dict[str, Any]:
        plan = TimeoutPlan.of(self.seed, index)
        return {
            "type": "life.timeout",
            "payload": {"hangs": plan.hangs},
            "idempotency_key": life_key("timeout", index),
            "timeout_seconds": plan.timeout,
            "max_attempts": plan.max_attempts,
            "lease_seconds": LEASE_SECONDS,
        }

    def snooze_job(self, index: int) -> dict[str, Any]:
        plan = SnoozePlan.of(self.seed, index)
        return {
            "type": "life.snooze",
            "payload": {"seconds": list(plan.seconds)},
            "idempotency_key": life_key("snooze", index),
            "max_attempts": MAX_ATTEMPTS,
            "lease_seconds": LEASE_SECONDS,
        }

    def deadline_job(self, index: int, group: Group | None = None) -> dict[str, Any]:
        """A job with a start deadline: its plan's, or (`group` "paused") one a moment ahead."""
        if group == "paused":
            key, ahead = life_key("paused", index), PAUSED_AHEAD_SECONDS
        else:
            plan = DeadlinePlan.of(self.seed, index)
            key, group, ahead = life_key("deadline", index), plan.group, plan.ahead
        start_by = datetime.now(UTC) + timedelta(seconds=ahead)
        self.start_by[key] = start_by.timestamp()
        self.groups[key] = group
        job = {
            "type": "life.deadline",
            "idempotency_key": key,
            "start_by": start_by.isoformat(),
            "max_attempts": MAX_ATTEMPTS,
            "lease_seconds": LEASE_SECONDS,
        }
        if group == "doomed":
            job["delay_seconds"] = DOOMED_DELAY_SECONDS
        return job

    async def enqueue(self, jobs: list[dict[str, Any]]) -> None:
        response, _ = await self.api.call(
            "life_enqueue", f"/v1/queues/{LIFECYCLE_QUEUE}/jobs/batch", {"jobs": jobs}
        )
        if response.status_code != 201:
            raise AssertionError(f"lifecycle enqueue: {response.status_code} {response.text}")
        self.keys.update(job["idempotency_key"] for job in jobs)

    async def pause_twice(self) -> None:
        """Pause the queue, enqueue jobs due before it resumes, resume: twice."""
        began = time.monotonic()
        for n, fraction in enumerate(PAUSES):
            due = began + fraction * self.duration * SUBMIT_SHARE
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await self.queue_action("pause")
            paused = time.monotonic()
            await self.enqueue(
                [self.deadline_job(n * PAUSED_JOBS + i, "paused") for i in range(PAUSED_JOBS)]
            )
            last = max(
                self.start_by[life_key("paused", n * PAUSED_JOBS + i)] for i in range(PAUSED_JOBS)
            )
            # resumed once every deadline has passed, and the pause lasted its while
            await asyncio.sleep(
                max(last + 0.2 - time.time(), paused + PAUSE_SECONDS - time.monotonic(), 0.0)
            )
            await self.queue_action("resume")
            self.pauses += 1

    async def queue_action(self, action: str) -> None:
        response, _ = await self.api.call(
            f"life_{action}", f"/v1/queues/{LIFECYCLE_QUEUE}/{action}", {}
        )
        if response.status_code != 200:
            raise AssertionError(f"lifecycle {action}: {response.status_code} {response.text}")

    # ---- leasing -------------------------------------------------------------------

    async def lease(
        self, worker: str, kind: str, max_jobs: int
    ) -> tuple[list[dict[str, Any]], float]:
        """Leases of one type of job (none when the call failed), and when it was sent."""
        body = {
            "queues": [LIFECYCLE_QUEUE],
            "types": [kind],
            "max_jobs": max_jobs,
            "wait_seconds": 1,
            "lease_seconds": LEASE_SECONDS,
            "worker_id": worker,
        }
        try:
            response, sent = await self.api.call("life_lease", "/v1/leases", body)
        except GaveUp:
            return [], time.time()
        if response.status_code != 200:
            self.unexpected.append(f"lease: {response.status_code} {response.text[:200]}")
            await asyncio.sleep(0.2)
            return [], sent
        leases: list[dict[str, Any]] = response.json()["leases"]
        return leases, sent

    async def on_lease(self, op: str, token: str, path: str, body: Any) -> Call | None:
        """A call on a lease, retried through faults; None when it gave up."""
        first = time.time()
        try:
            response, _ = await self.api.call(f"life_{op}", path, body)
        except GaveUp:
            return None
        status, code = response.status_code, problem_code(response)
        if op == "acks" and status == 200:
            result = response.json()["results"][0]
            status, code = result["status"], result["code"]
        return Call(op, first, status, code, time.time())

    # ---- timeouts ------------------------------------------------------------------

    async def timed_loop(self, worker: str) -> None:
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                room = TIMED_IN_FLIGHT - len(running)
                if room <= 0:
                    await asyncio.sleep(0.05)
                    continue
                leases, _ = await self.lease(worker, "life.timeout", min(4, room))
                for lease in leases:
                    task = asyncio.create_task(self.timed(lease))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            for task in running:
                task.cancel()

    async def timed(self, lease: dict[str, Any]) -> None:
        job, token = lease["job"], lease["lease_id"]
        if lease["timeout_at"] is None:
            self.unexpected.append(f"job {job['id']}: a lease without timeout_at")
            return
        held = Held(
            job["id"],
            token,
            job["attempt"],
            hang=job["attempt"] <= job["payload"]["hangs"],
            timeout_at=epoch(lease["timeout_at"]),
            received=time.time(),
        )
        held.ends.append(epoch(lease["expires_at"]))
        self.held.append(held)
        if not held.hang:
            await asyncio.sleep(random.uniform(*WORK_SECONDS))
            call = await self.on_lease(
                "complete", token, f"/v1/leases/{token}/complete", {"result": {"on": "time"}}
            )
            if call is not None:
                held.calls.append(call)
            return
        # hang: heartbeat past the timeout (each beat tried once), asking for a longer
        # lease than the timeout leaves, then try to finish
        while time.time() < held.timeout_at + HANG_PAST_SECONDS:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            sent = time.time()
            response = await self.api.once(
                "life_heartbeat",
                f"/v1/leases/{token}/heartbeat",
                {"extend_seconds": LEASE_SECONDS},
            )
            if response is None:
                continue
            held.calls.append(
                Call("heartbeat", sent, response.status_code, problem_code(response), time.time())
            )
            if response.status_code != 200:
                break
            held.ends.append(epoch(response.json()["expires_at"]))
        op = HUNG_CALLS[(held.job + held.attempt) % len(HUNG_CALLS)]
        path, body = {
            "complete": (f"/v1/leases/{token}/complete", {"result": {"on": "late"}}),
            "fail": (f"/v1/leases/{token}/fail", {"error": {"type": "Late"}, "retryable": True}),
            "snooze": (f"/v1/leases/{token}/snooze", {"seconds": 0.1}),
            "acks": ("/v1/acks", {"acks": [{"lease_id": token, "outcome": "complete"}]}),
        }[op]
        call = await self.on_lease(op, token, path, body)
        if call is not None:
            held.calls.append(call)

    # ---- snoozes -------------------------------------------------------------------

    async def snooze_loop(self, worker: str) -> None:
        while True:
            leases, _ = await self.lease(worker, "life.snooze", 5)
            for lease in leases:
                await asyncio.sleep(random.uniform(*WORK_SECONDS) / 4)
                await self.snooze_or_complete(lease)

    async def snooze_or_complete(self, lease: dict[str, Any]) -> None:
        job, token = lease["job"], lease["lease_id"]
        seconds: list[float] = job["payload"]["seconds"]
        done = job["snoozes"]
        if done >= len(seconds):
            with contextlib.suppress(GaveUp):  # else the lease expires and the job runs again
                await self.api.call("life_complete", f"/v1/leases/{token}/complete", {})
            return
        try:
            response, sent = await self.api.call(
                "life_snooze", f"/v1/leases/{token}/snooze", {"seconds": seconds[done]}
            )
        except GaveUp:
            return
        answer = response.json() if response.status_code == 200 else {}
        self.snoozed.append(
            {
                "job": job["id"],
                "lease": token,
                "attempt": job["attempt"],
                "snoozes": done,
                "sent": sent,
                "status": response.status_code,
                "code": problem_code(response),
                "answer": {k: answer.get(k) for k in ("state", "attempt", "snoozes")},
            }
        )

    # ---- start deadlines -----------------------------------------------------------

    async def deadline_loop(self, worker: str) -> None:
        while True:
            leases, sent = await self.lease(worker, "life.deadline", 10)
            for lease in leases:
                self.deadline_leases.append((lease["job"]["id"], sent))
            for lease in leases:
                token = lease["lease_id"]
                with contextlib.suppress(GaveUp):  # else the lease expires and the job runs again
                    await self.api.call("life_complete", f"/v1/leases/{token}/complete", {})

    async def done(self) -> bool:
        if not self.submitted:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state IN ('waiting', 'queued', 'running')) AS open"
            "  FROM jobq.jobs WHERE queue = $1",
            LIFECYCLE_QUEUE,
        )
        return rows is not None and rows[0]["open"] == 0
