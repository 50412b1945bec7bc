"""The push scenario: jobq's dispatcher delivering to a minimal local endpoint, beside a
floor that POSTs the same envelopes to it as fast as it can.

One `jobq serve` process of its own (one replica; the run's main service delivers
nothing meanwhile: `JOBQ_PUSH_CONCURRENCY=0`), allowed to reach loopback
(`JOBQ_PUSH_ALLOWED_TARGETS`), and the endpoint (`bench.push_endpoint`, one uvicorn
process answering 200 at once). In rounds:

- push: `--push-jobs` jobs queued in SQL, then the queue given its push target; timed
  from the first delivery's arrival to every job succeeded in the table;
- floor: one process with a plain `httpx.AsyncClient` POSTing as many envelopes (the
  shape and size of a delivery, serialised and signed per request as the dispatcher
  does) with the dispatcher's concurrency; timed from the first arrival to the last
  answer.

Then enqueue to delivery with the dispatcher idle: jobs enqueued one at a time over HTTP,
each timed from before its enqueue call to its arrival at the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx
import pydantic_core

from app.delivery import Secrets, create_transport, new_secret, sign
from bench import database
from bench.base import Bench
from bench.service import Service
from bench.stats import latency_summary, ratio

QUEUE = "bench-push"
ENDPOINT_PATH = "/hook"
LOOPBACK = "http://127.0.0.1:*"
SETTLE_POLL_SECONDS = 0.02
SETTLE_TIMEOUT_SECONDS = 600.0
LATENCY_TIMEOUT_SECONDS = 10.0
# the dispatcher reads targets on a change and then waits: past a second (its idle
# wait), it is waiting on the enqueue announcements
IDLE_SETTLE_SECONDS = 1.5


# ---- the floor: a plain client, in a process of its own ------------------------------


async def _post_all(url: str, sample: str, secret: str, jobs: int, concurrency: int) -> float:
    template = json.loads(sample)
    secrets = Secrets.parse([secret])
    next_job = iter(range(1, jobs + 1))
    # a plain httpx client over the dispatcher's transport (httpx's own pool is slower)
    transport = create_transport(max_connections=concurrency)
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:

        async def worker() -> None:
            for job_id in next_job:
                body = pydantic_core.to_json({**template, "job_id": job_id})
                headers = {
                    "content-type": "application/json",
                    **sign(secrets, f"floor_{job_id}", body.decode()),
                }
                answer = await client.post(url, content=body, headers=headers)
                answer.raise_for_status()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.time()


def floor_posts(url: str, sample: str, secret: str, jobs: int, concurrency: int) -> float:
    """POST `jobs` envelopes like `sample`, each signed, `concurrency` at a time; the wall
    time of the last answer."""
    return asyncio.run(_post_all(url, sample, secret, jobs, concurrency))


# ---- the scenario --------------------------------------------------------------------


def _stamps(endpoint: Service) -> dict[str, Any]:
    answer = httpx.get(f"{endpoint.url}/stamps", timeout=30)
    answer.raise_for_status()
    document: dict[str, Any] = answer.json()
    return document


def _settled(bench: Bench, jobs: int) -> float:
    """Wait for `jobs` succeeded jobs; the wall time they were seen."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        states = bench.db(database.job_states(bench.url))
        if states.get("succeeded", 0) == jobs:
            return time.time()
        if states.get("failed", 0) or states.get("dead", 0):
            raise RuntimeError(f"push: deliveries failed: {states}")
        time.sleep(SETTLE_POLL_SECONDS)
    raise RuntimeError(f"push: {jobs} jobs not delivered in {SETTLE_TIMEOUT_SECONDS:.0f} s")


def _set_target(service: Service, target: dict[str, Any] | None) -> None:
    """The push queue's target (None: not pushed; its jobs wait)."""
    settings = f"{service.url}/v1/queues/{QUEUE}/settings"
    httpx.put(settings, json={"push": target}, timeout=30).raise_for_status()


def _delivered(
    bench: Bench, service: Service, endpoint: Service, target: dict[str, Any], jobs: int
) -> dict[str, Any]:
    """Queue `jobs` jobs, push them, wait until all succeeded: deliveries per second from
    the first arrival, and the endpoint's sample of what arrived."""
    bench.db(database.queue_jobs(bench.url, QUEUE, jobs))
    _stamps(endpoint)
    _set_target(service, target)
    done = _settled(bench, jobs)
    arrived = _stamps(endpoint)
    _set_target(service, None)
    arrivals = arrived["stamps"]
    if len(arrivals) != jobs:
        raise RuntimeError(f"push: {len(arrivals)} of {jobs} deliveries arrived")
    return {"per_s": jobs / (done - min(arrivals.values())), "sample": arrived["sample"]}


def _floor_round(bench: Bench, endpoint: Service, sample: str, secret: str, workers: int) -> float:
    jobs = bench.config.push_jobs
    _stamps(endpoint)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        url = endpoint.url + ENDPOINT_PATH
        last = pool.submit(floor_posts, url, sample, secret, jobs, workers).result()
    arrivals: dict[str, float] = _stamps(endpoint)["stamps"]
    if len(arrivals) != jobs:
        raise RuntimeError(f"push floor: {len(arrivals)} of {jobs} requests arrived")
    return jobs / (last - min(arrivals.values()))


def _latency(bench: Bench, service: Service, endpoint: Service, target: dict[str, Any]) -> Any:
    c = bench.config
    _set_target(service, target)
    time.sleep(IDLE_SETTLE_SECONDS)
    _stamps(endpoint)
    enqueued: dict[str, float] = {}
    with httpx.Client(base_url=service.url, timeout=30) as http:
        for _ in range(c.push_latency_samples):
            time.sleep(c.push_latency_interval_ms / 1000 * random.uniform(0.5, 1.5))
            started = time.time()
            answer = http.post(f"/v1/queues/{QUEUE}/jobs", json={"type": "bench"})
            answer.raise_for_status()
            enqueued[f"job_{answer.json()['id']}_attempt_1"] = started
    deadline = time.monotonic() + LATENCY_TIMEOUT_SECONDS
    arrivals: dict[str, float] = {}
    while len(arrivals) < len(enqueued) and time.monotonic() < deadline:
        time.sleep(0.1)
        arrivals.update(_stamps(endpoint)["stamps"])
    missing = set(enqueued) - set(arrivals)
    if missing:
        raise RuntimeError(f"push latency: {len(missing)} of {len(enqueued)} never arrived")
    return latency_summary([(arrivals[k] - t) * 1000 for k, t in enqueued.items()])


def push(bench: Bench) -> None:
    """Deliveries/s of one replica against the floor's, in rounds; then enqueue to
    delivery with the dispatcher idle."""
    c = bench.config
    concurrency = c.push_concurrency
    env = {**c.service_env, "JOBQ_PUSH_ALLOWED_TARGETS": LOOPBACK}
    env["JOBQ_PUSH_CONCURRENCY"] = str(concurrency)
    bench.db(database.reset_jobs(bench.url))
    logs = bench.log_dir
    endpoint = Service(bench.url, workers=1, log_path=logs / "endpoint.log", app="endpoint")
    service = Service(bench.url, workers=1, log_path=logs / "push.log", extra_env=env)
    secret = new_secret()
    with endpoint, service:
        target = {"url": endpoint.url + ENDPOINT_PATH, "secrets": [secret]}
        bench.say(
            f"push: {c.push_jobs:,} jobs to a local endpoint, one replica, concurrency "
            f"{concurrency}; the floor (httpx) back to back; {c.push_rounds} round(s)"
        )
        # the floor's envelopes: a delivery's, as it arrived (the endpoint keeps its first)
        sample = _delivered(bench, service, endpoint, target, 1)["sample"]["body"]
        rounds = []
        for n in range(c.push_rounds):
            pushed = _delivered(bench, service, endpoint, target, c.push_jobs)["per_s"]
            floor = _floor_round(bench, endpoint, sample, secret, concurrency)
            rounds.append(
                {"push_per_s": round(pushed, 1), "floor_per_s": round(floor, 1),
                 "vs_floor": ratio(pushed, floor)}
            )  # fmt: skip
            bench.say(
                f"  round {n + 1}: push {pushed:,.0f}/s, floor {floor:,.0f}/s "
                f"({pushed / floor:.2f}x)"
            )
        bench.db(database.reset_jobs(bench.url))
        bench.say(
            f"push latency: {c.push_latency_samples} jobs enqueued one at a time, "
            "the dispatcher idle"
        )
        latency = _latency(bench, service, endpoint, target)
        bench.say(f"  p50 {latency['p50_ms']:.2f} ms, p95 {latency['p95_ms']:.2f} ms")
    bench.scenarios["push"] = {
        "jobs": c.push_jobs,
        "concurrency": concurrency,
        "envelope_bytes": len(sample.encode()),
        "rounds": rounds,
        "median": {
            key: statistics.median(r[key] for r in rounds)
            for key in ("push_per_s", "floor_per_s", "vs_floor")
        },
        "latency": latency,
    }
