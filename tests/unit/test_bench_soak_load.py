"""The soak's producer holds its rate while the service answers more slowly than the gap
between two jobs (the benchmark's own process test runs it against a real service)."""

from __future__ import annotations

import asyncio
import json
import time

from bench.generators import Answer
from bench.soak_load import PRODUCER_CONNECTIONS, SoakLoad

RATE = 100  # jobs a second: one due every 10 ms
ENQUEUE_SECONDS = 0.05  # each enqueue answered after five of those gaps


class SlowService:
    """Stands in for one connection: an enqueue is answered after `ENQUEUE_SECONDS`; a
    lease waits a little and finds nothing."""

    def __init__(self, sent: list[int]) -> None:
        self.sent = sent
        self.busy = False

    async def post(self, path: str, content: bytes) -> Answer:
        assert not self.busy, "two requests at once on one connection"
        self.busy = True
        try:
            if path.endswith("/jobs"):
                await asyncio.sleep(ENQUEUE_SECONDS)
                self.sent.append(json.loads(content)["payload"]["i"])
                return Answer("POST", path, 201, b"{}")
            await asyncio.sleep(0.02)
            return Answer("POST", path, 200, b'{"leases": []}')
        finally:
            self.busy = False


def test_the_producer_sends_each_job_when_due_while_answers_lag() -> None:
    sent: list[int] = []
    load = SoakLoad(
        0,
        {"queue": "q", "rate": RATE, "seconds": 1, "workers": 1, "max_jobs": 10,
         "fail_every": 0},
    )  # fmt: skip
    fakes = [SlowService(sent) for _ in range(PRODUCER_CONNECTIONS + 1)]
    load.clients = fakes  # type: ignore[assignment]  # the producer's, then one worker's

    started, wall = time.monotonic(), time.time()
    result = asyncio.run(load.run())
    took = time.monotonic() - started

    # one connection, one job after another, would take 100 x 50 ms = 5 s, the last
    # jobs 4 s late
    assert sorted(sent) == list(range(RATE))
    assert result["enqueued"] == RATE
    assert result["late_enqueues"] == 0
    assert took < 2.0
    # the steady phase ends a second (`seconds`) after the load began
    assert abs(result["steady_until"] - (wall + 1)) < 0.5
