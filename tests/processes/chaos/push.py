"""The push load: a pushed queue whose endpoint fails at random, through the same faults.

The harness serves an endpoint on loopback (in its own process, so no fault stops it)
and points `PUSH_QUEUE` at it, with `max_running` and a `TIMEOUT_SECONDS` target
timeout; `PUSH_JOBS` jobs are enqueued over the producers' window. The endpoint checks
each delivery's Standard Webhooks signature and answers at random: 200 with a result,
202 (then completes the job through the ordinary call with the envelope's lease id),
429 with Retry-After, 500, a hang past the timeout, or a closed connection.

The invariants (`check_push`): every job was delivered and succeeded, through a lease
that was delivered (a 2xx, or the 202's completion); never more than `MAX_RUNNING`
deliveries in flight at the endpoint (a delivery counts until its answer, or until the
target's timeout, when the dispatcher gave up on it); a 429 spent no attempt (no attempt
ended as `http_429`); every signature verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from standardwebhooks import Webhook, WebhookVerificationError

from app.delivery import new_secret
from tests.delivery_endpoint import Answer, Endpoint, Received, serving
from tests.processes.chaos import PUSH_QUEUE, Api, GaveUp
from tests.processes.chaos.databases import Db

if TYPE_CHECKING:
    from tests.processes.chaos.verdict import Verdict

SECRET = new_secret()
MAX_RUNNING = 3
PUSH_JOBS = 60
TIMEOUT_SECONDS = 1.0
HANG_SECONDS = TIMEOUT_SECONDS + 0.5
ACCEPTED_FINISH_SECONDS = 0.2
# (outcome, weight): what the endpoint answers a delivery
OUTCOMES = [("ok", 55), ("accepted", 15), ("busy", 10), ("error", 10), ("hang", 5), ("close", 5)]


@dataclass
class Delivery:
    job_id: int
    attempt: int
    lease_id: str
    outcome: str
    began: float
    ended: float = 0.0


@dataclass
class ChaosEndpoint(Endpoint):
    """Answers `/push` at random and records each delivery; completes 202s later."""

    api: Api | None = None
    rng: random.Random = field(default_factory=random.Random)
    deliveries: list[Delivery] = field(default_factory=list)
    invalid: int = 0
    completions: dict[str, int] = field(default_factory=dict)  # a 202's lease: its status
    finishing: set[asyncio.Task[None]] = field(default_factory=set)

    async def answer(self, got: Received) -> Answer:
        if got.path != "/push":
            return await super().answer(got)
        try:
            Webhook(SECRET).verify(got.body, got.headers)
        except WebhookVerificationError:
            self.invalid += 1
            return 401, {}, b"bad signature"
        sent = json.loads(got.body)
        outcome = self.rng.choices([o for o, _ in OUTCOMES], [w for _, w in OUTCOMES])[0]
        delivery = Delivery(
            sent["job_id"], sent["attempt"], sent["lease_id"], outcome, time.monotonic()
        )
        self.deliveries.append(delivery)
        try:
            if outcome == "ok":
                return 200, {"content-type": "application/json"}, b'{"pushed": true}'
            if outcome == "accepted":
                task = asyncio.create_task(self.finish_later(delivery.lease_id))
                self.finishing.add(task)
                task.add_done_callback(self.finishing.discard)
                return 202, {}, b""
            if outcome == "busy":
                return 429, {"retry-after": "1"}, b"later"
            if outcome == "error":
                return 500, {}, b"boom"
            if outcome == "hang":
                await asyncio.sleep(HANG_SECONDS)
                return 200, {}, b"{}"
            return None  # "close": the connection, without an answer
        finally:
            delivery.ended = time.monotonic()

    async def finish_later(self, lease_id: str) -> None:
        await asyncio.sleep(ACCEPTED_FINISH_SECONDS)
        assert self.api is not None
        with contextlib.suppress(GaveUp):  # else the lease expires and it is delivered again
            response, _ = await self.api.call(
                "push_complete", f"/v1/leases/{lease_id}/complete", {"result": {"late": True}}
            )
            self.completions[lease_id] = response.status_code


@dataclass
class PushLoad:
    api: Api
    db: Db
    seed: int
    duration: float
    endpoint: ChaosEndpoint = field(init=False)
    submitted: bool = False

    def __post_init__(self) -> None:
        self.endpoint = ChaosEndpoint(api=self.api, rng=random.Random(self.seed))

    async def run(self) -> None:
        async with serving(self.endpoint) as endpoint:
            settings = {
                "max_running": MAX_RUNNING,
                "push": {
                    "url": endpoint.base + "/push",
                    "secrets": [SECRET],
                    "timeout_seconds": TIMEOUT_SECONDS,
                },
            }
            response, _ = await self.api.call(
                "push_settings", f"/v1/queues/{PUSH_QUEUE}/settings", settings, method="PUT"
            )
            if response.status_code != 200:
                raise AssertionError(f"push target: {response.status_code} {response.text}")
            began = time.monotonic()
            for n in range(PUSH_JOBS):
                job = {"type": "push.step", "idempotency_key": f"push-{n}", "max_attempts": 25}
                response, _ = await self.api.call(
                    "push_enqueue", f"/v1/queues/{PUSH_QUEUE}/jobs", job
                )
                if response.status_code not in (200, 201):
                    raise AssertionError(f"push enqueue: {response.status_code} {response.text}")
                pace = began + self.duration * (n + 1) / PUSH_JOBS - time.monotonic()
                await asyncio.sleep(max(0.0, pace))
            self.submitted = True
            await asyncio.Event().wait()  # the endpoint serves until the load is over

    async def done(self) -> bool:
        if not self.submitted:
            return False
        rows = await self.db.fetch_quietly(
            "SELECT count(*) FILTER (WHERE state = 'succeeded') AS done FROM jobq.jobs"
            " WHERE queue = $1",
            PUSH_QUEUE,
        )
        return rows is not None and rows[0]["done"] == PUSH_JOBS


def most_in_flight(deliveries: list[Delivery]) -> int:
    """The most deliveries in flight at once, each from its arrival to its answer or to
    the target's timeout, whichever came first."""
    edges = []
    for d in deliveries:
        edges += [(d.began, 1), (min(d.ended or d.began, d.began + TIMEOUT_SECONDS), -1)]
    most = now = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        now += step
        most = max(most, now)
    return most


async def check_push(load: PushLoad, db: Db, v: Verdict) -> dict[str, Any]:
    """The pushed queue's invariants; failures go to the verdict."""
    endpoint = load.endpoint
    rows = await db.fetch(
        "SELECT j.id, j.state::text AS state,"
        "       replace(jobq.attempts_of(j) -> -1 ->> 'lease_id', '-', '') AS last_lease,"
        "       array(SELECT a #>> '{error,type}' FROM jsonb_array_elements(jobq.attempts_of(j)) a"
        "              WHERE a #>> '{error,type}' IS NOT NULL) AS errors"
        "  FROM jobq.jobs j WHERE j.queue = $1",
        PUSH_QUEUE,
    )
    states = {r["state"] for r in rows}
    if len(rows) != PUSH_JOBS or states != {"succeeded"}:
        v.fail("a pushed job did not succeed", f"{len(rows)} jobs, states {sorted(states)}")
    delivered = {d.job_id for d in endpoint.deliveries}
    finished_by = {  # as the leases' uuids (a token is `<job id>-<uuid's hex>`)
        d.lease_id.partition("-")[2]
        for d in endpoint.deliveries
        if d.outcome == "ok" or endpoint.completions.get(d.lease_id) == 200
    }
    for r in rows:
        if r["id"] not in delivered:
            v.fail("a pushed job was never delivered", f"job {r['id']}")
        elif r["state"] == "succeeded" and r["last_lease"] not in finished_by:
            v.fail("a pushed job succeeded through no delivery", f"job {r['id']}")
        spent = [e for e in r["errors"] if e in ("http_429", "http_503")]
        if spent:
            v.fail("a Retry-After answer spent an attempt", f"job {r['id']}: {spent}")
    most = most_in_flight(endpoint.deliveries)
    if most > MAX_RUNNING:
        v.fail("more deliveries in flight than max_running", f"{most}, limit {MAX_RUNNING}")
    if endpoint.invalid:
        v.fail("a delivery's signature did not verify", f"{endpoint.invalid} deliveries")
    outcomes: dict[str, int] = {}
    for d in endpoint.deliveries:
        outcomes[d.outcome] = outcomes.get(d.outcome, 0) + 1
    return {
        "jobs": PUSH_JOBS,
        "deliveries": len(endpoint.deliveries),
        "outcomes": outcomes,
        "max_running": MAX_RUNNING,
        "most_in_flight": most,
        "invalid_signatures": endpoint.invalid,
    }
