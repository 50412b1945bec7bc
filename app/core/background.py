"""What a running jobq does besides answering requests (the LISTEN connection, the
maintenance loops, the pool gauge), under one protocol: each part is started in turn
once everything is built, and the parts are stopped in the reverse order at shutdown,
each stop bounded (`app.core.shutdown`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from app.core import shutdown


class Background(Protocol):
    """A part of the service that runs beside the requests."""

    @property
    def name(self) -> str: ...

    async def start(self) -> None:
        """Begin (a failure stops the parts already started, and the service's start)."""

    async def stop(self) -> None:
        """End, within `shutdown.STEP_SECONDS`."""


class Task:
    """A coroutine that runs until it is cancelled (a loop), as an asyncio task."""

    def __init__(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            await shutdown.stop_tasks([self._task])


class Step:
    """A part made of two functions: what starting it does, and what stopping it does."""

    def __init__(
        self,
        name: str,
        *,
        start: Callable[[], Awaitable[None]] | None = None,
        stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        self._start = start
        self._stop = stop

    async def start(self) -> None:
        if self._start is not None:
            await self._start()

    async def stop(self) -> None:
        if self._stop is not None:
            await shutdown.within(self._stop(), self.name)


@contextlib.asynccontextmanager
async def running(parts: Sequence[Background]) -> AsyncIterator[None]:
    """`parts` started in order for the block, then stopped in the reverse order (those
    started, should one fail to start)."""
    async with contextlib.AsyncExitStack() as stack:
        for part in parts:
            await part.start()
            stack.push_async_callback(part.stop)
        yield
