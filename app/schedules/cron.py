"""When a schedule ticks: a standard 5-field cron expression (or `@hourly`-style alias),
the same with a seconds field first (6 fields), or an interval (`@every 10s`), in an
IANA time zone, with daylight saving time handled as people expect.

Only standard cron is accepted, checked here field by field before croniter sees it:
numbers, `*`, ranges (`1-5`), lists (`1,15`), steps (`*/15`, `1-30/5`) and the English
names of months (`jan`) and days (`mon`, 0 and 7 both Sunday); a sixth field is the
second, first (croniter's `second_at_beginning`, as River's and Hatchet's cron read
it). Croniter's extensions (`R` random, `L`, `W`, `#`, `?`) are refused, and so is an
expression that never matches (`0 0 31 2 *`). Time zones are the IANA names the system
knows, but not `Factory` or `localtime`, which name no place.

An interval (`@every 1h30m`, `@every 10s`: hours, minutes and seconds, whole) ticks
at every multiple of it since the Unix epoch, whatever the time zone, so each replica
computes the same ticks. No schedule ticks more often than once a second
(`MIN_TICK_SECONDS`): a 6-field cron cannot, and a shorter interval is refused.

Ticks are computed in the zone's wall-clock time. A wall time that does not exist (the
hour skipped when clocks go forward) is skipped; a wall time that happens twice (the
hour repeated when they go back) runs once, at its first occurrence. Everything else
deals in UTC.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterError, croniter

ALIASES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
NOT_PLACES = frozenset({"Factory", "localtime", "posixrules"})  # in tzdata, but no zone
FIELDS_RULE = (
    "must be 5 fields (minute hour day-of-month month day-of-week), 6 with the second "
    "first, an interval (@every 10s, @every 1h30m) or one of " + ", ".join(sorted(ALIASES))
)
MIN_TICK_SECONDS = 1  # the floor: no schedule ticks more often
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
_EVERY = re.compile(r"@every\s+(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # the names of low, low + 1, ...


_SECOND = _Field("second", 0, 59)
_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, tuple(m.lower() for m in calendar.month_abbr[1:])),
    _Field("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")),
)
_ITEM = re.compile(r"(?P<range>\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/(?P<step>[0-9]+))?", re.IGNORECASE)


class InvalidSchedule(ValueError):
    """A cron expression or time zone jobq cannot use; `field` says which."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones() - NOT_PLACES)


def zone(name: str, *, strict: bool = True) -> ZoneInfo:
    if strict and name not in _zones():
        raise InvalidSchedule("timezone", f"{name!r} is not an IANA time zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule("timezone", f"{name!r} is not an IANA time zone") from None


def _value(text: str, field: _Field, *, end: bool = False) -> int:
    """A number or name; a range's `end` reads `sun` as 7 (`mon-sun`)."""
    if text.isdigit():
        value = int(text)
        if not field.low <= value <= field.high:
            raise InvalidSchedule(
                "cron", f"{field.name} {value} is out of range {field.low}-{field.high}"
            )
        return value
    name = text.lower()
    if name in field.names:
        index = (
            len(field.names) - 1 - field.names[::-1].index(name) if end else field.names.index(name)
        )
        return field.low + index
    named = f" or a name ({field.names[0]}, {field.names[1]}, ...)" if field.names else ""
    raise InvalidSchedule(
        "cron", f"{field.name} {text!r} is not a number {field.low}-{field.high}{named}"
    )


def _values(text: str, field: _Field) -> set[int]:
    """The values one field matches; `InvalidSchedule` saying what is wrong with it."""
    found: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise InvalidSchedule(
                "cron",
                f"{field.name} {item!r} is not a value, a range (1-5), a list (1,15) or a "
                "step (*/15, 1-30/5)",
            )
        step = 1
        if match["step"] is not None:
            step = int(match["step"])
            if not 1 <= step <= field.high:
                raise InvalidSchedule(
                    "cron", f"{field.name} step {step} is out of range 1-{field.high}"
                )
            if match["range"] != "*" and "-" not in match["range"]:
                raise InvalidSchedule(
                    "cron", f"{field.name} {item!r}: a step follows * or a range (1-30/5)"
                )
        if match["range"] == "*":
            low, high = field.low, field.high
        else:
            first, _, last = match["range"].partition("-")
            low = _value(first, field)
            high = _value(last, field, end=True) if last else low
            if low > high:
                raise InvalidSchedule("cron", f"{field.name} range {low}-{high} runs backwards")
        found.update(range(low, high + 1, step))
    return found


def _never(days: set[int], months: set[int]) -> bool:
    """No month listed has a day listed (February counted with its 29th)."""
    return all(min(days) > calendar.monthrange(2024, month)[1] for month in months)


def interval(expression: str) -> int | None:
    """The seconds of an `@every` interval (not checked against the floor); None if the
    expression is not one."""
    match = _EVERY.fullmatch(expression.strip())
    if match is None or not any(match.groupdict().values()):
        return None
    h, m, s = (int(match[unit] or 0) for unit in "hms")
    return h * 3600 + m * 60 + s


def _every(seconds: int) -> str:
    """An interval as `check` writes it: `@every 1h30m`, `@every 10s`."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{value}{unit}" for value, unit in ((h, "h"), (m, "m"), (s, "s")) if value]
    return "@every " + "".join(parts)


def check(expression: str) -> str:
    """`expression`, if it is standard cron (5 fields, or 6 with the second first) that
    matches some time, an alias, or an interval of `MIN_TICK_SECONDS` or more (written
    as `_every` writes it)."""
    text = expression.strip()
    if text in ALIASES:
        return text
    if text.startswith("@every"):
        seconds = interval(text)
        if seconds is None:
            raise InvalidSchedule(
                "cron",
                f"{text!r}: an interval is whole hours, minutes and seconds, at least "
                f"{MIN_TICK_SECONDS} s (the floor): @every 10s, @every 1h30m",
            )
        if not MIN_TICK_SECONDS <= seconds <= MAX_INTERVAL_SECONDS:
            raise InvalidSchedule(
                "cron",
                f"{text!r}: an interval is at least {MIN_TICK_SECONDS} s (the floor) and at "
                f"most {MAX_INTERVAL_SECONDS} s",
            )
        return _every(seconds)
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule("cron", f"{FIELDS_RULE}; it has {len(fields)}")
    if len(fields) == 6:
        _values(fields[0], _SECOND)
    values = [_values(field, rule) for field, rule in zip(fields[-5:], _FIELDS, strict=True)]
    # a day matches by day of month or by day of week, unless one of them is `*`
    if fields[-1] == "*" and _never(values[2], values[3]):
        raise InvalidSchedule(
            "cron", f"{text!r} never matches: no month listed has day {min(values[2])}"
        )
    # the same rules, as croniter reads them
    if not croniter.is_valid(text, second_at_beginning=len(fields) == 6):
        raise InvalidSchedule("cron", FIELDS_RULE)
    return text


class Cron:
    """A schedule's ticks."""

    def __init__(self, expression: str, timezone: str, *, strict: bool = True) -> None:
        """`strict=False`: a stored schedule, accepted when rules were looser, runs on."""
        self.expression = check(expression) if strict else expression.strip()
        self.zone = zone(timezone, strict=strict)
        self.every = interval(self.expression)  # seconds, for an interval
        self._seconds_first = len(self.expression.split()) == 6

    def first_after(self, moment: datetime) -> datetime:
        """The next tick after `moment`, or `InvalidSchedule` if croniter finds none."""
        try:
            return self.next_after(moment)
        except (CroniterError, StopIteration):
            raise InvalidSchedule("cron", f"{self.expression!r} never matches") from None

    def _walls(self, start: datetime, backwards: bool) -> Iterator[datetime]:
        """Wall-clock ticks from `start`'s wall time, as naive datetimes, either way."""
        wall = start.astimezone(self.zone).replace(tzinfo=None)
        if backwards:
            # a tick at `start` counts (5-field cron has no seconds; later ones are skipped)
            wall += timedelta(seconds=1)
        ticks = croniter(self.expression, wall, second_at_beginning=self._seconds_first)
        while True:
            yield ticks.get_prev(datetime) if backwards else ticks.get_next(datetime)

    def _real(self, wall: datetime) -> datetime | None:
        """The UTC instant of a wall time (its first occurrence); None if it does not exist."""
        aware = wall.replace(tzinfo=self.zone, fold=0)
        utc = aware.astimezone(UTC)
        if utc.astimezone(self.zone).replace(tzinfo=None) != wall:
            return None  # skipped when clocks went forward
        return utc

    def _intervals(self, moment: datetime, every: int, backwards: bool) -> Iterator[datetime]:
        """An interval's ticks from the last at or before `moment`, either way."""
        step = timedelta(seconds=every)
        tick = _EPOCH + (moment - _EPOCH) // step * step
        if not backwards:
            tick += step
        while True:
            yield tick
            tick = tick - step if backwards else tick + step

    def after(self, moment: datetime) -> Iterator[datetime]:
        """Every tick strictly after `moment` (aware), in UTC, in order."""
        if self.every is not None:
            yield from self._intervals(moment, self.every, backwards=False)
            return
        for wall in self._walls(moment, backwards=False):
            utc = self._real(wall)
            if utc is not None and utc > moment:
                yield utc

    def before(self, moment: datetime) -> Iterator[datetime]:
        """Every tick at or before `moment` (aware), in UTC, newest first."""
        if self.every is not None:
            yield from self._intervals(moment, self.every, backwards=True)
            return
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
