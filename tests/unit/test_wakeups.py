"""Who an announcement wakes: as many waiting requests as jobs announced, not the herd;
and when a process hears announcements at all."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.names import is_name
from app.db.listener import MAX_ANNOUNCED_JOBS, MAX_EPOCH, parse_due, parse_finished
from app.jobs.finishes import Finishes
from app.jobs.waiting import LOOKS_BURST, LOOKS_PER_SECOND
from app.jobs.wakeups import QueueWaiter, Wakeups


def _wakeups() -> Wakeups:
    return Wakeups(poll_seconds=30, recheck_seconds=30)


@contextlib.contextmanager
def _waiting(wakeups: Wakeups, count: int, *, typed: bool = False) -> Iterator[list[QueueWaiter]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(wakeups.waiter(["q"], typed=typed)) for _ in range(count)]


def _woken(waiters: list[QueueWaiter]) -> list[bool]:
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


async def test_one_due_time_announced_with_and_without_a_count_wakes_them_all() -> None:
    # A retried job's due time, announced by its statement (1 job) and looked up when
    # hearing began (a count not known): the heap compared 1 with None, a TypeError that
    # failed the lease that looked it up (a 500 in CI's soak).
    wakeups = _wakeups()
    with _waiting(wakeups, 3) as waiters:
        soon = time.time() + 0.1
        wakeups.announce("q", soon, 1)
        wakeups.announce("q", soon)
        wakeups.announce("q", soon, 2)
        assert _woken(waiters) == [False] * 3
        await asyncio.sleep(0.3)
        assert _woken(waiters) == [True] * 3  # some jobs of unknown count: everyone


async def _nothing_due(queues: list[str]) -> list[tuple[str, float]]:
    """A look-up of missed due times that finds none."""
    return []


def _hearing(wakeups: Wakeups, due: list[tuple[str, float]]) -> tuple[list[bool], list[str]]:
    """Wire `wakeups` to a listener that hears at once when asked; what it was asked, and
    the queues whose due times were looked up."""
    asked: list[bool] = []
    looked_up: list[str] = []

    def hear(wanted: bool) -> None:
        asked.append(wanted)
        wakeups.heard(wanted)

    async def next_due(queues: list[str]) -> list[tuple[str, float]]:
        looked_up.extend(queues)
        return due

    wakeups.hear_with(hear, next_due)
    wakeups.listening = True
    return asked, looked_up


async def test_a_waiter_that_looked_before_hearing_began_looks_again_first() -> None:
    wakeups = _wakeups()
    asked, looked_up = _hearing(wakeups, [])
    with wakeups.waiter(["q"]) as first, wakeups.waiter(["q"]) as second:
        second.reset()  # its look began before the process heard announcements
        await asyncio.sleep(0.01)
        assert await wakeups.ready(first, 5) is True  # hearing began: look again
        assert asked == [True] and looked_up == ["q"]
        assert await wakeups.ready(second, 5) is True  # "q" is known, but it looked before
        assert looked_up == ["q"]  # once per queue
        first.reset()
        second.reset()
        assert await wakeups.ready(first, 5) is False
        assert await wakeups.ready(second, 5) is False


async def test_due_times_missed_before_hearing_arm_the_timers() -> None:
    wakeups = _wakeups()
    _hearing(wakeups, [("q", time.time() + 0.2)])
    with wakeups.waiter(["q"]) as waiter:
        assert await wakeups.ready(waiter, 5) is True
        waiter.reset()
        assert await wakeups.ready(waiter, 5) is False
        started = time.monotonic()
        assert await wakeups.wait(waiter, 5) is True  # the looked-up due time's timer
        assert 0.1 < time.monotonic() - started < 1


async def test_hearing_stops_a_linger_after_the_last_wait() -> None:
    wakeups = Wakeups(poll_seconds=30, recheck_seconds=30, linger_seconds=0.2)
    asked, _ = _hearing(wakeups, [])
    with wakeups.waiter(["q"]) as waiter:
        await wakeups.ready(waiter, 5)
        waiter.reset()
        assert await wakeups.wait(waiter, 0.4) is False  # waiting holds the hearing on
        assert asked == [True] and wakeups.hearing
    await asyncio.sleep(0.35)
    assert asked == [True, False] and not wakeups.hearing


async def test_a_waiter_that_waited_through_a_pause_in_hearing_looks_again() -> None:
    # The linger asks the listener to stop; a waiter comes before it has stopped, finds
    # the process still hearing and waits. The listener stops (what is announced then is
    # not heard) and begins again, for the new waiter: the waiter must look again, not
    # sleep through the re-check interval on a hint it may have missed.
    wakeups = Wakeups(poll_seconds=30, recheck_seconds=30, linger_seconds=0.05)
    asked: list[bool] = []

    wakeups.hear_with(asked.append, _nothing_due)  # the listener answers when the test says
    wakeups.listening = True
    with wakeups.waiter(["q"]) as first:
        getting_ready = asyncio.create_task(wakeups.ready(first, 5))
        await asyncio.sleep(0.01)
        wakeups.heard(True)
        assert await getting_ready is True
    await asyncio.sleep(0.15)  # the linger passed: stopping is asked, not yet done
    assert asked == [True, False] and wakeups.hearing
    with wakeups.waiter(["q"]) as waiter:
        waiter.reset()
        assert await wakeups.ready(waiter, 5) is False  # still hearing: it may wait
        assert asked == [True, False, True]
        waiting = asyncio.create_task(wakeups.wait(waiter, 5))
        await asyncio.sleep(0.01)
        wakeups.heard(False)  # stopped; a job announced now goes unheard
        wakeups.heard(True)  # and hearing again, as the waiter asked
        assert await asyncio.wait_for(waiting, 1) is True  # woken to look again


async def test_without_a_listener_a_waiter_waits_at_once() -> None:
    wakeups = _wakeups()
    asked, _ = _hearing(wakeups, [])
    wakeups.listening = False  # the LISTEN connection is down: the wait polls
    with wakeups.waiter(["q"]) as waiter:
        assert await wakeups.ready(waiter, 5) is False
    assert asked == []


async def test_closing_releases_a_waiter_waiting_for_hearing_to_begin() -> None:
    wakeups = _wakeups()

    wakeups.hear_with(lambda _wanted: None, _nothing_due)  # a listener that never hears
    wakeups.listening = True
    with wakeups.waiter(["q"]) as waiter:
        getting_ready = asyncio.create_task(wakeups.ready(waiter, 30))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        wakeups.close()
        assert await getting_ready is False
        assert time.monotonic() - started < 1
        assert await wakeups.wait(waiter, 30) is False


# One announcement: the queue, when it falls due (seconds from the test's start; -1: at
# once), and its job count (None: not known). Few distinct due times, so that several
# announcements share one, as a job's own announcement and a looked-up due time do.
_announcements = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([-1.0, 0.02, 0.04]),
        st.one_of(st.none(), st.integers(min_value=1, max_value=3)),
    ),
    max_size=8,
)
_waiters = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.booleans()), max_size=6)


@settings(max_examples=40, deadline=None, database=None)
@given(waiters=_waiters, announcements=_announcements)
def test_any_announcements_wake_whom_their_counts_say(
    waiters: list[tuple[str, bool]], announcements: list[tuple[str, float, int | None]]
) -> None:
    async def scenario() -> None:
        wakeups = _wakeups()
        with contextlib.ExitStack() as stack:
            waiting = [
                (queue, typed, stack.enter_context(wakeups.waiter([queue], typed=typed)))
                for queue, typed in waiters
            ]
            start = time.time()
            for queue, due, jobs in announcements:
                wakeups.announce(queue, start + due, jobs)
            await asyncio.sleep(0.08)  # every timer has fired
            for queue in ("a", "b"):
                told = [jobs for q, _, jobs in announcements if q == queue]
                mine = [(typed, w.woken.done()) for q, typed, w in waiting if q == queue]
                plain = [woken for typed, woken in mine if not typed]
                if any(jobs is None for jobs in told):
                    expected = [True] * len(plain)  # a count not known: everyone
                else:
                    count = min(sum(j for j in told if j is not None), len(plain))
                    expected = [True] * count + [False] * (len(plain) - count)  # oldest first
                assert plain == expected, (queue, told)
                assert all(woken for typed, woken in mine if typed) or not told
        wakeups.close()

    asyncio.run(scenario())


# ---- announcements are untrusted: any database role can send them ------------------------

_junk = st.one_of(
    st.text(max_size=40),
    st.builds(
        "{} {} {}".format,
        st.sampled_from(["q", "a.b", "", " ", "q\n", "é"]),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True).map(repr),
            st.sampled_from(["NaN", "nan", "Infinity", "-Infinity", "1e400", "0x10", "1_0"]),
        ),
        st.one_of(st.integers().map(str), st.sampled_from(["", "NaN", "1e3", "-1", "+1"])),
    ),
)


@settings(max_examples=300, deadline=None, database=None)
@given(payload=_junk)
def test_a_due_announcement_is_parsed_strictly_or_dropped(payload: str) -> None:
    parsed = parse_due(payload)
    if parsed is not None:
        queue, due, jobs = parsed
        assert is_name(queue) and "\n" not in queue
        assert math.isfinite(due) and abs(due) < MAX_EPOCH
        assert jobs is None or 0 <= jobs <= MAX_ANNOUNCED_JOBS
        assert " ".join(payload.split(" ")[:1]) == queue


def test_what_the_triggers_send_is_parsed_and_nothing_else() -> None:
    assert parse_due("q 1732780000.123456 3") == ("q", 1732780000.123456, 3)
    assert parse_due("a.b:c-d 1732780000") == ("a.b:c-d", 1732780000.0, None)
    for payload in ["q NaN 1", "q nan", "q Infinity 1", "q -Infinity", "q 1e400 1", "q 1 -1",
                    "q 1 1e3", "q 1 99999999999999999999", "q", "", "q 1 1 1", " q 1", "q  1",
                    "q\n 1", "q 1 +1", "q 1.5e3 1", "q 999999999999 1"]:  # fmt: skip
        assert parse_due(payload) is None, payload
    assert parse_finished("42") == 42
    for payload in ["", "0", "-1", "+1", " 1", "1 ", "1e3", "NaN", str(2**63), "1_0", "x"]:
        assert parse_finished(payload) is None, payload


async def test_a_due_time_that_is_not_a_number_arms_no_timer() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 1, typed=True) as waiters:
        for due in (math.nan, math.inf, -math.inf):
            wakeups.announce("q", due, 1)
        await asyncio.sleep(0.02)
        assert _woken(waiters) == [False]  # no timer firing in a loop, nobody woken
        assert not wakeups._timers  # no timer left to spin


async def test_a_timer_firing_early_wakes_nobody_and_waits_again() -> None:
    wakeups = _wakeups()
    with _waiting(wakeups, 1, typed=True) as waiters:
        wakeups.announce("q", time.time() + 0.05, 1)
        wakeups._fire("q")  # as if the clock had moved back
        assert _woken(waiters) == [False]
        await asyncio.sleep(0.15)
        assert _woken(waiters) == [True]


async def _looks_under_a_flood(
    announce: Callable[[], None], look: Callable[[], Awaitable[object]]
) -> int:
    """How many looks a waiter takes in half a second of announcements back to back."""
    looks = 0
    stop = time.monotonic() + 0.5
    loop = asyncio.get_running_loop()

    def flood() -> None:
        announce()
        if time.monotonic() < stop:
            loop.call_soon(flood)

    loop.call_soon(flood)
    while time.monotonic() < stop:
        looks += 1
        await look()
    return looks


async def test_a_flood_of_wake_ups_is_paced() -> None:
    wakeups = _wakeups()
    with wakeups.waiter(["q"], typed=True) as waiter:

        async def look() -> bool:
            waiter.reset()
            return await wakeups.wait(waiter, 1.0)

        looks = await _looks_under_a_flood(lambda: wakeups.announce("q", time.time(), 1), look)
    assert looks <= LOOKS_BURST + LOOKS_PER_SECOND * 0.5 + 2, looks


async def test_a_flood_of_finish_announcements_is_paced() -> None:
    finishes = Finishes(poll_seconds=30, recheck_seconds=30)
    with finishes.waiter(7) as waiter:

        async def look() -> None:
            waiter.reset()
            await finishes.wait(waiter, 1.0)

        looks = await _looks_under_a_flood(lambda: finishes.announce(7), look)
    assert looks <= LOOKS_BURST + LOOKS_PER_SECOND * 0.5 + 2, looks
