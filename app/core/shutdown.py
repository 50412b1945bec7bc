"""Bounded shutdown steps: a step that does not end in time is logged and left behind,
so that SIGTERM always ends the process (an orchestrator's SIGKILL would come anyway,
without saying which step hung)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from app.core.logging import event

log = logging.getLogger("jobq")

STEP_SECONDS = 10.0  # the background tasks' stop, then the pool's close: each at most this


async def stop_tasks(
    tasks: Sequence[asyncio.Task[None]], seconds: float = STEP_SECONDS
) -> list[str]:
    """Cancel `tasks` and wait up to `seconds` for them to end; the names of those that
    did not (each logged), in order. A task that had failed is logged too."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=seconds)
    for task in done:
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("shutdown: %s had failed", task.get_name(), exc_info=error)
    late = sorted(task.get_name() for task in pending)
    for name in late:
        _late(name, seconds)
    return late


async def within(step: Awaitable[None], name: str, seconds: float = STEP_SECONDS) -> bool:
    """Wait up to `seconds` for `step`; False (logged) when it had to be left behind."""
    try:
        await asyncio.wait_for(step, seconds)
    except TimeoutError:
        _late(name, seconds)
        return False
    return True


def _late(name: str, seconds: float) -> None:
    event(
        log,
        "shutdown_step_late",
        "shutdown: %s did not end within %g s; left behind",
        name,
        seconds,
        level=logging.WARNING,
        step=name,
        seconds=seconds,
    )
