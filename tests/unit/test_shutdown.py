"""Bounded shutdown: SIGTERM ends the process even when a step hangs, and says which."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.core import shutdown


async def _forever() -> None:
    await asyncio.Event().wait()


async def _deaf(released: asyncio.Event) -> None:
    """A task that swallows its cancellation and keeps going (a hung step), until the
    test releases it."""
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def _fails() -> None:
    raise RuntimeError("broke before the shutdown")


async def test_tasks_that_stop_are_waited_for_and_a_deaf_one_is_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    polite = asyncio.create_task(_forever(), name="reaper")
    released = asyncio.Event()
    deaf = asyncio.create_task(_deaf(released), name="scheduler")
    failed = asyncio.create_task(_fails(), name="pruner")
    await asyncio.sleep(0)
    with caplog.at_level(logging.INFO, logger="jobq"):
        late = await shutdown.stop_tasks([polite, deaf, failed], seconds=0.2)
    assert late == ["scheduler"]
    assert polite.cancelled() and failed.done() and not deaf.done()
    messages = [r.getMessage() for r in caplog.records]
    assert "shutdown: scheduler did not end within 0.2 s; left behind" in messages
    assert "shutdown: pruner had failed" in messages
    assert [r.event for r in caplog.records if hasattr(r, "event")] == ["shutdown_step_late"]
    released.set()
    await deaf


async def test_a_step_within_its_time_is_awaited_and_a_slow_one_left_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(0.01)
        done.append("quick")

    assert await shutdown.within(quick(), "quick step", seconds=1) is True
    assert done == ["quick"]
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert await shutdown.within(_forever(), "closing the pool", seconds=0.05) is False
    assert "shutdown: closing the pool did not end within 0.05 s; left behind" in caplog.text


async def test_no_tasks_is_no_wait() -> None:
    assert await shutdown.stop_tasks([]) == []
