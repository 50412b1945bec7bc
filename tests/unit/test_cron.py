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
        ("* * * * * *", "UTC", "cron"),
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
