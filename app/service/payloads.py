"""JSON documents on their way into jsonb: serialised once, measured, and refused if unstorable."""

from __future__ import annotations

import json
import re
from typing import Any

from app.core.errors import PayloadTooLarge, ValidationFailed

# A `\u0000` escape is a NUL, which jsonb cannot hold; but after an escaped backslash
# (`\\u0000`, i.e. the text backslash-u-0-0-0-0) it is harmless.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def encode(value: Any, *, field: tuple[str | int, ...], max_bytes: int) -> str:
    """`value` as JSON text for a jsonb parameter, within `max_bytes` of UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except ValueError as exc:  # NaN/Infinity, or an unpaired surrogate
        raise ValidationFailed.field(
            field, f"not storable as JSON: {exc}", "json_invalid"
        ) from None
    if _NUL_ESCAPE.search(text):
        raise ValidationFailed.field(field, "JSON strings must not contain NUL", "json_invalid")
    if size > max_bytes:
        raise PayloadTooLarge(
            f"{'.'.join(map(str, field))} is {size} bytes of JSON; the limit is {max_bytes}",
            limit_bytes=max_bytes,
            size_bytes=size,
        )
    return text


def truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` of UTF-8, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")
