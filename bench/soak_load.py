"""The soak's load: a steady producer and long-polling workers, for as long as asked.

One producer enqueues single jobs at a fixed rate, each carrying the time it was sent;
`workers` long-poll (up to `max_jobs` each, `wait_seconds` 5), record each first
attempt's enqueue-to-lease latency with the time it arrived, and ack each batch with one
`/v1/acks` call: every `fail_every`-th job fails once (retried after the backoff),
the rest complete. With `notify`, each enqueue asks the framework floor (`bench.floor`),
which has no retries, to wake its long-pollers, as jobq always does.

The producer sends each job when it is due, whether or not the one before has been
answered, over up to `PRODUCER_CONNECTIONS` connections: the rate is the load's, not
the service's (one connection sending one job after another held 200 a second only while
an enqueue took under 5 ms). A job sent more than a second after it was due counts as
late; the load reports when its steady phase ended (`steady_until`), after which its
workers stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from bench.generators import HttpClient, HttpLoad, expect, job_body, lease_body

WAIT_SECONDS = 5.0
PRODUCER_CONNECTIONS = 8


def _acks(leases: list[dict[str, Any]], fail_every: int) -> bytes:
    acks = []
    for lease in leases:
        job = lease["job"]
        if fail_every and job["attempt"] == 1 and job["payload"]["i"] % fail_every == 0:
            acks.append(
                {"lease_id": lease["lease_id"], "outcome": "fail", "error": {"type": "Soak"}}
            )
        else:
            acks.append({"lease_id": lease["lease_id"], "outcome": "complete"})
    return json.dumps({"acks": acks}).encode()


class SoakLoad(HttpLoad):
    """A fixed rate of enqueues for `seconds`, leased and acked by long-polling workers."""

    clients_param = "clients"

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        # the producer's connections first, then one for each worker
        self.params["clients"] = PRODUCER_CONNECTIONS + int(self.params["workers"])
        await super().setup(stack)

    async def run(self) -> dict[str, Any]:
        queue, rate = self.params["queue"], float(self.params["rate"])
        seconds, fail_every = float(self.params["seconds"]), int(self.params["fail_every"])
        max_jobs = int(self.params["max_jobs"])
        samples: list[tuple[float, float]] = []  # (arrived, enqueue-to-lease ms)
        counts = {"enqueued": 0, "leased": 0, "failed": 0, "late_enqueues": 0}
        path = f"/v1/queues/{queue}/jobs"
        if self.params.get("notify"):
            path += "?notify=true"  # the framework floor notifies only when asked
        started = time.time()
        ends = started + seconds

        async def producer() -> None:
            free: asyncio.Queue[HttpClient] = asyncio.Queue()
            for client in self.clients[:PRODUCER_CONNECTIONS]:
                free.put_nowait(client)
            sending: set[asyncio.Task[None]] = set()
            failed: list[BaseException] = []

            async def send(client: HttpClient, i: int) -> None:
                try:
                    body = json.dumps(job_body({"i": i, "sent": time.time()})).encode()
                    expect(await client.post(path, content=body), 201)
                    counts["enqueued"] += 1
                except Exception as exc:  # raised by the producer below
                    failed.append(exc)
                finally:
                    free.put_nowait(client)

            for i in range(int(rate * seconds)):
                due = started + i / rate
                pause = due - time.time()
                if pause > 0:
                    await asyncio.sleep(pause)
                client = await free.get()  # waits only while every connection is busy
                if failed:
                    break
                if time.time() - due > 1:
                    counts["late_enqueues"] += 1  # the service fell a second behind the rate
                task = asyncio.create_task(send(client, i))
                sending.add(task)
                task.add_done_callback(sending.discard)
            await asyncio.gather(*sending)
            if failed:
                raise failed[0]

        async def worker(number: int, client: HttpClient) -> None:
            body = lease_body(queue, f"soak-{number}", max_jobs, wait_seconds=WAIT_SECONDS)
            while time.time() < ends:
                leased = expect(await client.post("/v1/leases", content=body), 200)
                arrived = time.time()
                leases = leased.json()["leases"]
                if not leases:
                    continue
                for lease in leases:
                    job = lease["job"]
                    if job.get("attempt", 1) == 1:  # the floor's jobs have no attempts
                        samples.append((arrived, (arrived - job["payload"]["sent"]) * 1000))
                counts["leased"] += len(leases)
                acked = expect(
                    await client.post("/v1/acks", content=_acks(leases, fail_every)), 200
                )
                counts["failed"] += sum(
                    1 for result in acked.json()["results"] if result.get("state") == "queued"
                )

        workers = self.clients[PRODUCER_CONNECTIONS:]
        await asyncio.gather(producer(), *(worker(n, c) for n, c in enumerate(workers)))
        return {**counts, "jobs": counts["leased"], "samples": samples, "steady_until": ends}
