"""W3C Trace Context (https://www.w3.org/TR/trace-context/): what a `traceparent` and a
`tracestate` look like, checked strictly. `jobq.check_trace` (migration 0037) holds the
SQL enqueue functions to the same rules (a test feeds both the same values)."""

from __future__ import annotations

import re

MAX_TRACEPARENT_LENGTH = 512  # version 00 is 55 characters; later versions may add fields
MAX_TRACESTATE_LENGTH = 8192
MAX_TRACESTATE_MEMBERS = 32

# version-trace_id-parent_id-flags, lowercase hex; a later version may append "-…"
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[!-~]*)?$"
_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)
_MEMBER = re.compile(
    r"(?:[a-z][_0-9a-z*/-]{0,255}|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_ZERO_TRACE_ID = "0" * 32
_ZERO_PARENT_ID = "0" * 16

TRACEPARENT_RULE = (
    "a W3C traceparent: version-trace_id-parent_id-flags in lowercase hex (2, 32, 16 and "
    "2 digits), ids not all zeros"
)
TRACESTATE_RULE = "a W3C tracestate: 1 to 32 comma-separated key=value members"


def valid_traceparent(value: str) -> bool:
    """Whether `value` is a traceparent a receiver may use (version ff, all-zero ids and
    a version 00 one with more fields are not)."""
    if len(value) > MAX_TRACEPARENT_LENGTH or _TRACEPARENT.match(value) is None:
        return False
    version = value[:2]
    if version == "ff" or (version == "00" and len(value) != 55):
        return False
    return value[3:35] != _ZERO_TRACE_ID and value[36:52] != _ZERO_PARENT_ID


def valid_tracestate(value: str) -> bool:
    """Whether `value` is a tracestate: 1 to 32 list members (empty ones between commas
    do not count), each `key=value`."""
    if len(value) > MAX_TRACESTATE_LENGTH:
        return False
    members = [m for m in (part.strip(" \t") for part in value.split(",")) if m]
    if not 1 <= len(members) <= MAX_TRACESTATE_MEMBERS:
        return False
    return all(_MEMBER.fullmatch(member) for member in members)


def from_headers(traceparents: list[str], tracestates: list[str]) -> tuple[str, str | None] | None:
    """The trace context of a request's headers, as a receiver takes it: none when the
    traceparent is missing, repeated or malformed (ignored, not refused); its tracestate
    (the headers joined) only when valid."""
    if len(traceparents) != 1 or not valid_traceparent(traceparents[0]):
        return None
    tracestate = ",".join(tracestates) if tracestates else None
    if tracestate is not None and not valid_tracestate(tracestate):
        tracestate = None
    return traceparents[0], tracestate
