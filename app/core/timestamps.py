"""The times jobq accepts: one range for every timestamp a request, the CLI or the SQL
functions give, so that any offset converts to UTC and PostgreSQL can store it.

Python and asyncpg know years 1 to 9999 only: `9999-12-31T23:59:59-14:00` is in year
10000 once in UTC, and `0001-01-01T00:00:00+14:00` in year 0. jobq takes times from
the Unix epoch to the end of 9999-12-30, UTC, and refuses others by name (422).
"""

from __future__ import annotations

from datetime import UTC, datetime

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
RANGE = "from 1970-01-01T00:00:00Z to 9999-12-30T23:59:59.999999Z"


class OutOfRange(ValueError):
    """A time before EARLIEST or after LATEST."""

    def __init__(self) -> None:
        super().__init__(f"must be a time {RANGE}")


def bounded(value: datetime) -> datetime:
    """`value` in UTC, or `OutOfRange`; `value` must carry its offset."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # its year leaves 1..9999 once in UTC
        raise OutOfRange() from None
    if not EARLIEST <= utc <= LATEST:
        raise OutOfRange()
    return utc
