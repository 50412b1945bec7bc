"""JSON documents on their way into jsonb: serialised once, measured, and refused if unstorable."""

from __future__ import annotations

import json
import re
from typing import Any

from app.core.errors import PayloadTooLarge, ValidationFailed

# A `\u0000` escape is a NUL, which jsonb cannot hold; but after an escaped backslash
# (`\\u0000`, i.e. the text backslash-u-0-0-0-0) it is harmless.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def depth(value: Any, *, stop_after: int | None = None) -> int:
    """How deeply arrays and objects nest in `value` (a scalar is 0, `[]` and `{"a": 1}` are 1).

    Iterative, so a hostile document cannot exhaust the interpreter's stack; with
    `stop_after`, the walk ends as soon as it finds a deeper level.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if stop_after is not None and deepest > stop_after:
            break
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
    return deepest


def check_depth(value: Any, *, field: tuple[str | int, ...], max_depth: int) -> None:
    """Refuse `value` (422 `validation_error`, type `json_too_deep`) if it nests too deeply."""
    if depth(value, stop_after=max_depth) > max_depth:
        raise ValidationFailed.field(
            field,
            f"JSON nests more than {max_depth} levels deep (arrays and objects)",
            "json_too_deep",
        )


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode(
    value: Any, *, field: tuple[str | int, ...], max_bytes: int, max_depth: int | None = None
) -> str:
    """`value` as JSON text for a jsonb parameter, within `max_bytes` of UTF-8 (and `max_depth`)."""
    if value is None:  # a complete without a result, most acks: no encoder call
        return "null"
    if max_depth is not None:
        check_depth(value, field=field, max_depth=max_depth)
    try:
        text = _ENCODER.encode(value)
        size = len(text.encode("utf-8"))
    except ValueError as exc:  # NaN/Infinity, or an unpaired surrogate
        raise ValidationFailed.field(
            field, f"not storable as JSON: {exc}", "json_invalid"
        ) from None
    if _NUL_ESCAPE.search(text):
        raise ValidationFailed.field(field, "JSON strings must not contain NUL", "json_invalid")
    if size > max_bytes:
        raise PayloadTooLarge.of_field(field, size, max_bytes)
    return text


def truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` of UTF-8, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")
