"""Cron ticks in a time zone: daylight saving time skips a tick that does not exist and
runs a repeated one once; catch-up after downtime makes the latest, none or all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from app.schedules.cron import Cron, InvalidSchedule
from app.schedules.rows import ScheduleRow
from app.schedules.scheduler import ticks_to_make


def local(ticks: list[datetime], cron: Cron) -> list[str]:
    return [t.astimezone(cron.zone).isoformat() for t in ticks]


def test_a_tick_that_does_not_exist_is_skipped() -> None:
    cron = Cron("30 2 * * *", "America/New_York")  # 2026-03-08: 02:00 jumps to 03:00
    ticks = list(islice(cron.after(datetime(2026, 3, 6, 12, tzinfo=UTC)), 3))
    assert local(ticks, cron) == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]


def test_a_repeated_hour_runs_once() -> None:
    cron = Cron("*/30 * * * *", "America/New_York")  # 2026-11-01: 01:00-02:00 twice
    ticks = list(islice(cron.after(datetime(2026, 11, 1, 4, 45, tzinfo=UTC)), 5))
    assert local(ticks, cron) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T02:00:00-05:00",  # 01:00 and 01:30 EST are not run again
        "2026-11-01T02:30:00-05:00",
        "2026-11-01T03:00:00-05:00",
    ]
    # Counting back over the same hour finds the same ticks.
    missed = cron.missed(ticks[0], ticks[-1], 10)
    assert missed == ticks


def test_aliases_and_utc() -> None:
    cron = Cron("@hourly", "UTC")
    now = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    assert cron.next_after(now) == now + timedelta(hours=1)
    assert next(cron.before(now)) == now  # a tick at `now` is due now
    assert cron.missed(now - timedelta(hours=5), now, 3) == [
        now - timedelta(hours=2),
        now - timedelta(hours=1),
        now,
    ]


@pytest.mark.parametrize(
    ("expression", "zone", "field"),
    [
        ("* * * *", "UTC", "cron"),
        ("* * * * * * *", "UTC", "cron"),
        ("60 * * * * *", "UTC", "cron"),
        ("@every 0s", "UTC", "cron"),
        ("@every 500ms", "UTC", "cron"),
        ("@every 10", "UTC", "cron"),
        ("61 * * * *", "UTC", "cron"),
        ("@sometimes", "UTC", "cron"),
        ("* * * * *", "Mars/Olympus_Mons", "timezone"),
        ("* * * * *", "../etc/passwd", "timezone"),
    ],
)
def test_bad_expressions_and_zones_name_their_field(expression: str, zone: str, field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        Cron(expression, zone)
    assert caught.value.field == field


def _schedule(catch_up: str, next_tick: datetime, limit: int = 100) -> ScheduleRow:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return ScheduleRow(
        "s", "q", "t", None, "@hourly", "UTC", 0, None, None, {}, False, catch_up, limit,
        next_tick, None, moment, moment,
    )  # fmt: skip


def test_catch_up_after_downtime() -> None:
    cron = Cron("@hourly", "UTC")
    now = datetime(2026, 11, 24, 10, 20, tzinfo=UTC)
    down_since = now - timedelta(hours=5, minutes=20)  # next_tick was 05:00
    assert ticks_to_make(_schedule("latest", down_since), cron, now) == [
        datetime(2026, 11, 24, 10, tzinfo=UTC)
    ]
    assert ticks_to_make(_schedule("none", down_since), cron, now) == []  # 20 min late
    assert len(ticks_to_make(_schedule("all", down_since), cron, now)) == 6  # 05:00 to 10:00
    assert ticks_to_make(_schedule("all", down_since, limit=2), cron, now) == [
        datetime(2026, 11, 24, 9, tzinfo=UTC),
        datetime(2026, 11, 24, 10, tzinfo=UTC),
    ]
    on_time = now.replace(minute=0, second=30)
    assert ticks_to_make(_schedule("none", on_time - timedelta(seconds=30)), cron, on_time) == [
        datetime(2026, 11, 24, 10, tzinfo=UTC)
    ]


def test_a_sixth_field_is_the_second_first() -> None:
    cron = Cron("*/2 * * * * *", "Europe/Paris")
    start = datetime(2026, 3, 29, 0, 59, 58, 500_000, tzinfo=UTC)  # Paris skips 02:00-03:00
    assert [t.isoformat() for t in islice(cron.after(start), 2)] == [
        "2026-03-29T01:00:00+00:00",
        "2026-03-29T01:00:02+00:00",
    ]
    assert Cron("30 0 9 * * mon", "UTC").next_after(start).isoformat() == (
        "2026-03-30T09:00:30+00:00"
    )


def test_an_interval_ticks_at_its_multiples_since_the_epoch_in_any_zone() -> None:
    for zone in ("UTC", "Asia/Kolkata"):
        cron = Cron("@every 90s", zone)
        assert cron.expression == "@every 1m30s"
        moment = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
        assert [t.isoformat() for t in islice(cron.after(moment), 2)] == [
            "2026-01-01T00:01:30+00:00",
            "2026-01-01T00:03:00+00:00",
        ]
        assert cron.before(moment).__next__().isoformat() == "2026-01-01T00:00:00+00:00"
    assert Cron("@every 1s", "UTC").missed(moment, moment + timedelta(seconds=3), 10) == [
        moment + timedelta(seconds=n) for n in range(4)
    ]


def test_the_floor_is_one_second() -> None:
    with pytest.raises(InvalidSchedule, match="at least 1 s"):
        Cron("@every 0s", "UTC")
    assert Cron("@every 1s", "UTC").expression == "@every 1s"


def test_every_tick_on_time_is_made_whatever_the_catch_up() -> None:
    """A pass that runs 5 s late on a 2-second schedule makes the three ticks it missed."""
    cron = Cron("*/2 * * * * *", "UTC")
    now = datetime(2026, 11, 24, 10, 0, 5, tzinfo=UTC)
    for catch_up in ("latest", "none"):
        assert ticks_to_make(_schedule(catch_up, now - timedelta(seconds=5)), cron, now) == [
            now - timedelta(seconds=n) for n in (5, 3, 1)
        ]
