"""Who an announcement wakes: as many waiting requests as jobs announced, not the herd."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from app.jobs.wakeups import Waiter, Wakeups


def _wakeups() -> Wakeups:
    return Wakeups(poll_seconds=30, recheck_seconds=30)


@contextlib.contextmanager
def _waiting(wakeups: Wakeups, count: int, *, typed: bool = False) -> Iterator[list[Waiter]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(wakeups.waiter(["q"], typed=typed)) for _ in range(count)]


def _woken(waiters: list[Waiter]) -> list[bool]:
    return [waiter.woken.done() for waiter in waiters]


async def test_an_announcement_wakes_one_waiter_per_job_longest_waiting_first() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 5) as waiters:
        wakeups.announce("q", time.time(), 2)
        assert _woken(waiters) == [True, True, False, False, False]
        wakeups.announce("q", time.time(), 1)  # the awake ones are not counted again
        assert _woken(waiters) == [True, True, True, False, False]
        wakeups.announce("other", time.time(), 5)
        assert _woken(waiters) == [True, True, True, False, False]


async def test_an_announcement_without_a_count_wakes_every_waiter() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 3) as waiters:
        wakeups.announce("q", time.time())
        assert _woken(waiters) == [True, True, True]


async def test_waiters_for_some_types_are_always_woken() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 2, typed=True) as typed, _waiting(wakeups, 2) as plain:
        wakeups.announce("q", time.time(), 1)
        assert _woken(typed) == [True, True] and _woken(plain) == [True, False]


async def test_a_wake_up_left_unused_goes_to_the_next_waiter() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 2) as sleeping:
        with wakeups.waiter(["q"]) as leaving:
            pass
        assert _woken(sleeping) == [False, False]  # nothing to hand on
        with wakeups.waiter(["q"]) as leaving:
            wakeups.announce("q", time.time(), 1)  # the longest waiting is woken
            assert _woken([*sleeping, leaving]) == [True, False, False]
            sleeping[0].reset()  # ... and claims
        with wakeups.waiter(["q"]) as leaving:
            wakeups.announce("q", time.time(), 1)
            assert _woken([*sleeping, leaving]) == [True, False, False]
        assert _woken(sleeping) == [True, False]  # awake already: no hand-on needed
        sleeping[0].reset()
        assert _woken(sleeping) == [False, False]
        # woken, then gone without claiming (its caller left, or it had just claimed)
        with wakeups.waiter(["q"]) as leaving:
            leaving.wake()
        assert _woken(sleeping) == [True, False]


async def test_a_timer_wakes_as_many_as_the_jobs_falling_due() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 4) as waiters:
        soon = time.time() + 0.1
        wakeups.announce("q", soon, 1)
        wakeups.announce("q", soon, 1)
        assert _woken(waiters) == [False] * 4
        await asyncio.sleep(0.3)
        assert _woken(waiters) == [True, True, False, False]
