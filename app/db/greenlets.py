"""Synchronous code that awaits, run in greenlets kept for the next call.

SQLAlchemy's pool is synchronous code that awaits through `sqlalchemy.util.await_`,
which works in a greenlet that `greenlet_spawn` started: a new greenlet for every call.
A new greenlet's first Python call maps a fresh 16 KiB frame stack, and its end unmaps
it again (one `mmap`, one `munmap`, page faults: about 8 µs a call here, most of it the
kernel's). `run` does what `greenlet_spawn` does in greenlets that wait for the next
call once they finished one (0.5 µs), one set per thread: a greenlet runs only in the
thread that made it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from greenlet import getcurrent, greenlet

T = TypeVar("T")
IDLE_RUNNERS = 64  # per thread, at most: as many as statements run at once, usually


class _Outcome:
    """What a call in a runner came to: its value, or what it raised."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any, error: BaseException | None) -> None:
        self.value = value
        self.error = error


class _Runner(greenlet):
    """A greenlet that runs one call after another, each sent by `run`."""

    __sqlalchemy_greenlet_provider__ = True  # where `await_` may switch to its driver

    def __init__(self) -> None:
        super().__init__(self._serve)

    def _serve(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        while True:
            try:
                outcome = _Outcome(fn(*args), None)
            except BaseException as exc:
                outcome = _Outcome(None, exc)
            del fn, args  # nothing of a finished call stays referenced while this waits
            driver = self.parent
            assert driver is not None  # `run` sets it before every call
            fn, args = driver.switch(outcome)


_local = threading.local()


def _idle() -> list[_Runner]:
    try:
        idle: list[_Runner] = _local.idle
    except AttributeError:
        idle = _local.idle = []
    return idle


async def run(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a greenlet where `await_` awaits in this task, as `greenlet_spawn`."""
    idle = _idle()
    runner = idle.pop() if idle else _Runner()
    driver = getcurrent()
    runner.parent = driver
    runner.gr_context = driver.gr_context  # the task's context variables
    result = runner.switch(fn, args)
    while not isinstance(result, _Outcome):
        try:
            value = await result
        except BaseException:
            result = runner.throw(*sys.exc_info())
        else:
            result = runner.switch(value)
    runner.gr_context = None  # holds no task's context while it waits
    if len(idle) < IDLE_RUNNERS:
        idle.append(runner)
    value, error = result.value, result.error
    result.value = result.error = None  # the waiting runner still refers to `result`
    if error is not None:
        try:
            raise error
        finally:
            del error  # no cycle through this frame, which its traceback holds
    return value  # type: ignore[no-any-return]
