"""When a schedule ticks: a standard 5-field cron expression (or `@hourly`-style alias),
in an IANA time zone, with daylight saving time handled as people expect.

Ticks are computed in the zone's wall-clock time. A wall time that does not exist (the
hour skipped when clocks go forward) is skipped; a wall time that happens twice (the
hour repeated when they go back) runs once, at its first occurrence. Everything else
deals in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

ALIASES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


class InvalidSchedule(ValueError):
    """A cron expression or time zone jobq cannot use; `field` says which."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule("timezone", f"{name!r} is not an IANA time zone") from None


def check(expression: str) -> str:
    """`expression`, if it is 5 cron fields or an alias."""
    text = expression.strip()
    if text in ALIASES:
        return text
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise InvalidSchedule(
            "cron",
            "must be 5 fields (minute hour day-of-month month day-of-week) or one of "
            + ", ".join(sorted(ALIASES)),
        )
    return text


class Cron:
    """A schedule's ticks."""

    def __init__(self, expression: str, timezone: str) -> None:
        self.expression = check(expression)
        self.zone = zone(timezone)

    def _walls(self, start: datetime, backwards: bool) -> Iterator[datetime]:
        """Wall-clock ticks from `start`'s wall time, as naive datetimes, either way."""
        wall = start.astimezone(self.zone).replace(tzinfo=None)
        if backwards:
            wall += timedelta(seconds=1)  # cron has no seconds: a tick at `start` counts
        ticks = croniter(self.expression, wall)
        while True:
            yield ticks.get_prev(datetime) if backwards else ticks.get_next(datetime)

    def _real(self, wall: datetime) -> datetime | None:
        """The UTC instant of a wall time (its first occurrence); None if it does not exist."""
        aware = wall.replace(tzinfo=self.zone, fold=0)
        utc = aware.astimezone(UTC)
        if utc.astimezone(self.zone).replace(tzinfo=None) != wall:
            return None  # skipped when clocks went forward
        return utc

    def after(self, moment: datetime) -> Iterator[datetime]:
        """Every tick strictly after `moment` (aware), in UTC, in order."""
        for wall in self._walls(moment, backwards=False):
            utc = self._real(wall)
            if utc is not None and utc > moment:
                yield utc

    def before(self, moment: datetime) -> Iterator[datetime]:
        """Every tick at or before `moment` (aware), in UTC, newest first."""
        seen: datetime | None = None
        for wall in self._walls(moment, backwards=True):
            utc = self._real(wall)
            if utc is not None and utc <= moment and utc != seen:
                seen = utc
                yield utc

    def next_after(self, moment: datetime) -> datetime:
        return next(self.after(moment))

    def missed(self, since: datetime, until: datetime, limit: int) -> list[datetime]:
        """The ticks from `since` to `until` (both inclusive), oldest first: at most the
        last `limit` of them."""
        found: list[datetime] = []
        for tick in self.before(until):
            if tick < since or len(found) == limit:
                break
            found.append(tick)
        return found[::-1]
