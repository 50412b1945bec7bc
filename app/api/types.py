"""Field types every domain's request schemas share: strict JSON numbers and timestamps,
text PostgreSQL can store, names.

Formats and hard bounds live in the schemas, so they appear in the OpenAPI document;
limits an operator may tune (payload size, batch sizes, longest lease) are settings,
checked by the services.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
)
from pydantic_core import PydanticCustomError

from app.core import timestamps
from app.core.fields import MAX_TEXT_LENGTH
from app.core.names import MAX_NAME_LENGTH, NAME_PATTERN, TICK_KEY_PREFIX


def _storable(value: str) -> str:
    """PostgreSQL text holds neither NUL characters nor unpaired surrogates."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no unpaired surrogates)") from None
    return value


Storable = AfterValidator(_storable)
StorableText = Annotated[str, Storable]


def _client_key(value: str) -> str:
    """A client's idempotency key: the scheduler's prefix is its own (a tick's job)."""
    if value.startswith(TICK_KEY_PREFIX):
        raise PydanticCustomError(
            "reserved_key",
            f"keys beginning with '{TICK_KEY_PREFIX}' are reserved for the scheduler's jobs",
        )
    return value


ClientKey = AfterValidator(_client_key)

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_LENGTH), Storable]


def _json_number(value: Any) -> Any:
    """Numbers in bodies are JSON numbers: lax parsing would read `true` as 1 and "5" as 5."""
    if isinstance(value, bool | str):
        raise PydanticCustomError("number_type", "Input should be a JSON number")
    return value


JsonNumber = BeforeValidator(_json_number)


_RFC3339_START = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _json_timestamp(value: Any) -> Any:
    """Times in requests are RFC 3339 text: lax parsing would read a number, or text of
    one ("0.5" in a query string), as Unix time."""
    if not isinstance(value, str) or not _RFC3339_START.match(value):
        raise PydanticCustomError("datetime_type", "Input should be an RFC 3339 timestamp")
    return value


def _in_range(value: datetime) -> datetime:
    try:
        return timestamps.bounded(value)
    except timestamps.OutOfRange as exc:
        raise PydanticCustomError("datetime_range", str(exc)) from None


# Every timestamp a request carries: RFC 3339 text with an offset, in jobq's range.
Timestamp = Annotated[AwareDatetime, BeforeValidator(_json_timestamp), AfterValidator(_in_range)]


class Strict(BaseModel):
    """Unknown fields are refused, so a typo (`priorty`) is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


class Percentiles(BaseModel):
    """A duration's median and 95th percentile, in seconds (null: nothing measured)."""

    p50: float | None
    p95: float | None
