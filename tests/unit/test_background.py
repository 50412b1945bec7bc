"""The background parts of a running jobq: started in order, stopped in the reverse
order, and those already started stopped when one fails to start."""

from __future__ import annotations

import asyncio

import pytest

from app.core.background import Step, Task, running


def _recorded(log: list[str], name: str, *, fail: bool = False) -> Step:
    async def start() -> None:
        if fail:
            raise RuntimeError(f"{name} cannot start")
        log.append(f"start {name}")

    async def stop() -> None:
        log.append(f"stop {name}")

    return Step(name, start=start, stop=stop)


async def test_parts_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []
    async with running([_recorded(log, "pool"), _recorded(log, "listener")]):
        log.append("serving")
    assert log == ["start pool", "start listener", "serving", "stop listener", "stop pool"]


async def test_a_part_that_fails_to_start_stops_those_started() -> None:
    log: list[str] = []
    parts = [_recorded(log, "pool"), _recorded(log, "auth", fail=True), _recorded(log, "loop")]
    with pytest.raises(RuntimeError, match="auth cannot start"):
        async with running(parts):
            log.append("serving")
    assert log == ["start pool", "stop pool"]


async def test_a_task_runs_until_stopped() -> None:
    ticks = 0

    async def loop() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = Task("loop", loop)
    async with running([task]):
        await asyncio.sleep(0.01)
    seen = ticks
    await asyncio.sleep(0.01)
    assert seen > 0 and ticks == seen
