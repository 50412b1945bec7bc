"""A chaos producer process: enqueues its share of the run's jobs, each with its own key.

    python -m tests.processes.chaos.producer --services URL[,URL...] --events PATH \
        --run RUN --seed SEED --first I --count N --duration SECONDS [--gate PATH]

Job number i gets the idempotency key `<run>-<i>` and the script `Script.for_index`.
Jobs go out one at a time (key in the `Idempotency-Key` header) or in batches of 2 to
100 (key in each job), paced so the last one leaves after about `duration` seconds.
A call that fails with a connection error, timeout or 5xx is sent again, identical,
with the same keys, to any service. Every answer 200/201 is logged as key → id.
With `--gate`, the last chunk waits until that file exists: the harness makes it once its
PostgreSQL restart is over, so on a slow machine the restart still falls inside the load.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from pathlib import Path
from typing import Any

from tests.processes.chaos import (
    MAX_ATTEMPTS,
    QUEUE,
    Api,
    EventLog,
    GaveUp,
    Script,
    job_key,
    problem_code,
)

SINGLE_SHARE = 0.3
MAX_BATCH = 100


class Producer:
    def __init__(self, api: Api, events: EventLog, run: str, seed: int) -> None:
        self.api = api
        self.events = events
        self.run = run
        self.seed = seed

    def job(self, index: int) -> dict[str, Any]:
        script = Script.for_index(self.seed, index)
        return {
            "type": f"chaos.{script.kind}",
            "payload": script.payload(index),
            "max_attempts": MAX_ATTEMPTS,
        }

    async def send(
        self, op: str, path: str, body: Any, keys: list[str], headers: dict[str, str] | None
    ) -> dict[str, Any] | None:
        """The answer's body once a service says 200/201; None when refused (a bug)."""
        while True:
            try:
                response, _ = await self.api.call(op, path, body, headers=headers)
            except GaveUp:
                self.events.write("rejected", keys=keys, status=None, body="gave up")
                return None
            if response.status_code == 409 and problem_code(response) == "conflict":
                continue  # the key changed hands during the call: ask again
            if response.status_code in (200, 201):
                answer: dict[str, Any] = response.json()
                answer["status"] = response.status_code
                return answer
            self.events.write(
                "rejected", keys=keys, status=response.status_code, body=response.text[:500]
            )
            return None

    async def enqueue_one(self, index: int) -> None:
        key = job_key(self.run, index)
        answer = await self.send(
            "enqueue", f"/v1/queues/{QUEUE}/jobs", self.job(index), [key], {"Idempotency-Key": key}
        )
        if answer is not None:
            self.events.write(
                "enq",
                key=key,
                id=answer["id"],
                status=answer["status"],
                dedup=answer["deduplicated"],
            )

    async def enqueue_batch(self, indices: list[int]) -> None:
        keys = [job_key(self.run, i) for i in indices]
        jobs = [{**self.job(i), "idempotency_key": k} for i, k in zip(indices, keys, strict=True)]
        answer = await self.send(
            "enqueue_batch", f"/v1/queues/{QUEUE}/jobs/batch", {"jobs": jobs}, keys, None
        )
        if answer is not None:
            for key, item in zip(keys, answer["jobs"], strict=True):
                self.events.write(
                    "enq",
                    key=key,
                    id=item["id"],
                    status=answer["status"],
                    dedup=item["deduplicated"],
                )

    async def produce(
        self, first: int, count: int, duration: float, gate: Path | None = None
    ) -> None:
        rng = random.Random(f"{self.seed}:producer:{first}")
        began = time.monotonic()
        done = 0
        while done < count:
            size = 1 if rng.random() < SINGLE_SHARE else rng.randint(2, MAX_BATCH)
            chunk = list(range(first + done, first + min(count, done + size)))
            await asyncio.sleep(max(0.0, began + duration * done / count - time.monotonic()))
            if gate is not None and done + len(chunk) == count:
                while not gate.exists():
                    await asyncio.sleep(0.05)
            if len(chunk) == 1:
                await self.enqueue_one(chunk[0])
            else:
                await self.enqueue_batch(chunk)
            done += len(chunk)


async def main_async(args: argparse.Namespace) -> int:
    events = EventLog(args.events)
    api = Api(args.services.split(","), events, role="producer")
    events.write("hello", first=args.first, count=args.count)
    try:
        await Producer(api, events, args.run, args.seed).produce(
            args.first, args.count, args.duration, args.gate
        )
    finally:
        await api.aclose()
    events.write("done")
    events.close()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", required=True, help="comma-separated base URLs")
    parser.add_argument("--events", type=Path, required=True, help="JSON-lines event log")
    parser.add_argument("--run", required=True, help="prefix of the idempotency keys")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--gate", type=Path, help="a file the last chunk waits for")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
