"""Limits an operator tunes (settings), checked where a request names them."""

from __future__ import annotations

from app.core.errors import ValidationFailed

Loc = tuple[str | int, ...]


def lease_seconds(value: int | None, limit: int, loc: Loc) -> int | None:
    """`value`, unless it is over the longest lease allowed (422 naming `loc`)."""
    if value is not None and value > limit:
        raise ValidationFailed.field(loc, f"must be at most {limit} seconds", "less_than_equal")
    return value


def at_most(count: int, limit: int, loc: Loc, what: str) -> None:
    """Refuse a batch of more than `limit` (422 naming `loc`): `what` says of what."""
    if count > limit:
        raise ValidationFailed.field(loc, f"at most {limit} {what}", "too_long")
