"""The loads that drive jobq, or the floor, over HTTP: batch enqueue, the drain, the
single-job path, and enqueue-to-lease latency."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from typing import Any

from bench.generators import (
    ACK_OK,
    EMPTY_LEASES_BEFORE_DONE,
    LEASE_TOKEN,
    HttpClient,
    HttpLoad,
    LoadError,
    acks_body,
    expect,
    job_body,
    lease_body,
    split,
)


class Enqueue(HttpLoad):
    """Batch enqueue: `concurrency` producers send prebuilt batches of `batch` jobs."""

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        await super().setup(stack)
        self.path = f"/v1/queues/{self.params['queue']}/jobs/batch"
        self.bodies = [
            json.dumps({"jobs": [job_body({"i": i}) for i in range(first, first + size)]}).encode()
            for first, size in self.params["batches"]
        ]
        self.sizes = [size for _, size in self.params["batches"]]

    async def run(self) -> dict[str, Any]:
        work = iter(zip(self.bodies, self.sizes, strict=True))
        latencies: list[float] = []
        jobs = 0

        async def producer(client: HttpClient) -> None:
            nonlocal jobs
            for body, size in work:
                sent = time.perf_counter()
                expect(await client.post(self.path, content=body), 201)
                latencies.append((time.perf_counter() - sent) * 1000)
                jobs += size

        await asyncio.gather(*(producer(client) for client in self.clients))
        return {"jobs": jobs, "requests": len(latencies), "request_ms": latencies}


class Drain(HttpLoad):
    """`workers` workers lease up to `max_jobs` each and ack the batch with one call.

    For a limited queue, `wait_seconds` makes a lease wait for room and `hold_seconds`
    holds each batch as if worked on, so that the limit binds. With `ack_lease`, each
    ack call also leases the worker's next batch (complete-and-lease); a worker leases
    on its own only when that gave it nothing.
    """

    clients_param = "workers"

    async def run(self) -> dict[str, Any]:
        counts = {"jobs": 0, "lease_calls": 0, "ack_calls": 0, "empty_leases": 0}
        last_ack = 0.0
        wait = self.params.get("wait_seconds", 0)
        hold = self.params.get("hold_seconds", 0)

        async def worker(number: int, client: HttpClient) -> None:
            nonlocal last_ack
            body = lease_body(
                self.params["queue"],
                f"bench-{self.index}-{number}",
                self.params["max_jobs"],
                wait_seconds=wait,
            )
            ack_lease = b',"lease":' + body + b"}" if self.params.get("ack_lease") else None
            empty = 0
            tokens: list[bytes] = []
            while empty < EMPTY_LEASES_BEFORE_DONE:
                if not tokens:
                    leased = expect(await client.post("/v1/leases", content=body), 200)
                    counts["lease_calls"] += 1
                    tokens = LEASE_TOKEN.findall(leased.content)
                if not tokens:
                    # everything was enqueued before the drain began: an empty answer means
                    # the queue is empty, or its last jobs are being claimed by others
                    counts["empty_leases"] += 1
                    empty += 1
                    if not wait:
                        await asyncio.sleep(0.01)
                    continue
                empty = 0
                if hold:
                    await asyncio.sleep(hold)
                acks = acks_body(tokens)
                if ack_lease is not None:
                    acks = acks[:-1] + ack_lease
                acked = expect(await client.post("/v1/acks", content=acks), 200)
                counts["ack_calls"] += 1
                results, _, more = acked.content.partition(b'"leases":')
                if results.count(ACK_OK) != len(tokens):
                    raise LoadError(f"not every ack succeeded: {acked.text[:500]}")
                counts["jobs"] += len(tokens)
                last_ack = time.time()
                tokens = LEASE_TOKEN.findall(more)  # none without `ack_lease`

        await asyncio.gather(*(worker(n, c) for n, c in enumerate(self.clients)))
        return {**counts, "last_done": last_ack}


class Single(HttpLoad):
    """`concurrency` loops of: enqueue one job, lease one job, complete it."""

    async def run(self) -> dict[str, Any]:
        counts = {"jobs": 0, "calls": 0, "empty_leases": 0}
        enqueue = f"/v1/queues/{self.params['queue']}/jobs"
        job = json.dumps(job_body({"i": 0})).encode()

        async def loop(number: int, client: HttpClient, jobs: int) -> None:
            lease = lease_body(self.params["queue"], f"bench-{self.index}-{number}", 1)
            for _ in range(jobs):
                expect(await client.post(enqueue, content=job), 201)
                while True:
                    leased = expect(await client.post("/v1/leases", content=lease), 200)
                    counts["calls"] += 1
                    tokens = LEASE_TOKEN.findall(leased.content)
                    if tokens:
                        break
                    counts["empty_leases"] += 1  # another loop took the job we saw queued
                path = f"/v1/leases/{tokens[0].decode()}/complete"
                expect(await client.post(path, content=b"{}"), 200)
                counts["calls"] += 2
                counts["jobs"] += 1

        shares = split(int(self.params["jobs"]), len(self.clients))
        await asyncio.gather(
            *(
                loop(n, c, share)
                for n, (c, share) in enumerate(zip(self.clients, shares, strict=True))
            )
        )
        return counts


class WaitLatency(HttpLoad):
    """Enqueue-to-lease latency: `workers` long-poll; one producer enqueues a job at a time.

    Each job carries `time.time()` from just before its enqueue request; the worker that
    receives it records the difference, then completes it and waits again.
    """

    clients_param = "clients"

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.params["clients"] = int(self.params["workers"]) + 1  # the producer's is the first
        await super().setup(stack)

    async def run(self) -> dict[str, Any]:
        queue, workers = self.params["queue"], int(self.params["workers"])
        samples, interval = int(self.params["samples"]), float(self.params["interval_s"])
        latencies: list[float] = []
        enqueue_ms: list[float] = []
        path = f"/v1/queues/{queue}/jobs"
        if self.params.get("notify"):
            path += "?notify=true"  # the framework floor notifies only when asked
        all_arrived = asyncio.Event()

        async def worker(number: int, client: HttpClient) -> None:
            body = lease_body(queue, f"bench-wait-{number}", 1, wait_seconds=20)
            while True:
                leased = expect(await client.post("/v1/leases", content=body), 200)
                received = time.time()
                for lease in leased.json()["leases"]:
                    payload = lease["job"]["payload"]
                    complete = f"/v1/leases/{lease['lease_id']}/complete"
                    expect(await client.post(complete, content=b"{}"), 200)
                    if payload.get("stop"):
                        return
                    latencies.append((received - payload["sent"]) * 1000)
                    if len(latencies) >= samples:
                        all_arrived.set()

        async def producer() -> None:
            await asyncio.sleep(float(self.params["settle_s"]))  # workers are now waiting
            for _ in range(samples):
                sent = time.time()
                body = json.dumps(job_body({"sent": sent})).encode()
                expect(await self.client.post(path, content=body), 201)
                enqueue_ms.append((time.time() - sent) * 1000)
                await asyncio.sleep(interval * random.uniform(0.5, 1.5))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_arrived.wait(), 30)
            stop = json.dumps(job_body({"stop": True}, priority=-1)).encode()
            for _ in range(workers):
                expect(await self.client.post(path, content=stop), 201)

        await asyncio.gather(producer(), *(worker(n, c) for n, c in enumerate(self.clients[1:])))
        return {"jobs": len(latencies), "latency_ms": latencies, "enqueue_ms": enqueue_ms}
