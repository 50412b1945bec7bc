"""`greenlets.run`: SQLAlchemy's `greenlet_spawn`, in greenlets kept for the next call."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref

import pytest
from greenlet import getcurrent
from sqlalchemy.util.concurrency import await_only

from app.db import greenlets

TAG: contextvars.ContextVar[str] = contextvars.ContextVar("tag", default="none")


def awaits(value: int) -> int:
    """Synchronous code that awaits, as SQLAlchemy's pool does."""
    return await_only(asyncio.sleep(0, result=value)) + 1


async def test_a_call_awaits_in_its_task_and_returns() -> None:
    assert await greenlets.run(awaits, 41) == 42
    assert await greenlets.run(lambda: 7) == 7  # one that never awaits


async def test_finished_runners_take_the_next_calls() -> None:
    await greenlets.run(awaits, 1)
    runners = set(map(id, greenlets._idle()))
    assert runners
    for n in range(20):
        assert await greenlets.run(awaits, n) == n + 1
    assert set(map(id, greenlets._idle())) == runners


async def test_concurrent_calls_each_have_a_runner() -> None:
    def slow(n: int) -> tuple[int, int]:
        me = id(getcurrent())
        await_only(asyncio.sleep(0.01))
        assert id(getcurrent()) == me
        return n, me

    results = await asyncio.gather(*(greenlets.run(slow, n) for n in range(10)))
    assert [n for n, _ in results] == list(range(10))
    assert len({me for _, me in results}) == 10
    assert len(greenlets._idle()) >= 10


async def test_errors_reach_the_caller_and_the_runner_goes_on() -> None:
    def fails() -> None:
        await_only(asyncio.sleep(0))
        raise KeyError("k")

    def catches() -> str:
        try:
            await_only(asyncio.wait_for(asyncio.sleep(1), 0.001))
        except TimeoutError:
            return "caught in the greenlet"
        return "not raised"

    with pytest.raises(KeyError):
        await greenlets.run(fails)
    assert await greenlets.run(catches) == "caught in the greenlet"
    assert await greenlets.run(awaits, 1) == 2


async def test_a_cancelled_task_cancels_the_call_inside() -> None:
    steps: list[str] = []
    started = asyncio.Event()

    def waits() -> None:
        try:
            steps.append("waiting")
            await_only(asyncio.sleep(10))
        finally:
            steps.append("finally")

    async def caller() -> None:
        started.set()
        await greenlets.run(waits)

    task = asyncio.create_task(caller())
    await started.wait()
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps == ["waiting", "finally"]
    assert await greenlets.run(awaits, 2) == 3


async def test_the_tasks_context_variables_are_seen_and_not_kept() -> None:
    TAG.set("task")
    assert await greenlets.run(TAG.get) == "task"
    assert all(runner.gr_context is None for runner in greenlets._idle())


async def test_nothing_of_a_finished_call_stays_referenced() -> None:
    class Rows(list[int]):
        pass

    def rows() -> Rows:
        await_only(asyncio.sleep(0))
        return Rows([1, 2])

    def fails(rows: Rows) -> None:
        raise ValueError(len(rows))  # its traceback refers to `rows`

    result = await greenlets.run(rows)
    gone = weakref.ref(result)
    try:
        await greenlets.run(fails, result)
    except ValueError as exc:
        assert exc.args == (2,)
    del result
    assert gone() is None


def test_each_thread_has_runners_of_its_own() -> None:
    seen: dict[str, object] = {}

    def in_thread() -> None:
        seen["answer"] = asyncio.run(greenlets.run(awaits, 9))
        seen["runners"] = list(greenlets._idle())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen["answer"] == 10
    assert seen["runners"] and not set(map(id, seen["runners"])) & set(  # type: ignore[call-overload]
        map(id, greenlets._idle())
    )


async def test_a_runner_serves_callers_at_any_depth() -> None:
    async def nested(depth: int, value: int) -> int:
        if depth:
            return await nested(depth - 1, value)  # each level a C frame of its own
        return await greenlets.run(awaits, value)

    greenlets._idle().clear()
    assert await nested(0, 1) == 2  # a new runner, started near the top of the stack
    for depth, value in ((200, 2), (0, 3), (60, 4), (200, 5)):
        assert await nested(depth, value) == value + 1
    assert len(greenlets._idle()) == 1  # the same runner, from every depth
