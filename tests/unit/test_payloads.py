"""JSON on its way into jsonb (no database needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.errors import PayloadTooLarge, ValidationFailed
from app.jobs.payloads import encode, truncate_utf8

LOC = ("body", "payload")


@pytest.mark.parametrize(
    "value", ["C:\\u0000dir", "\\\\u0000", {"k\\u0000": 1}, "plain", None, [1.5, True]]
)
def test_text_that_merely_looks_like_a_nul_escape_is_stored(value: Any) -> None:
    assert encode(value, field=LOC, max_bytes=1000)


@pytest.mark.parametrize("value", ["a\x00b", "\\\x00", {"k\x00": 1}, ["\\\\\x00"]])
def test_real_nul_characters_are_refused(value: Any) -> None:
    with pytest.raises(ValidationFailed) as caught:
        encode(value, field=LOC, max_bytes=1000)
    assert caught.value.extra["errors"][0]["loc"] == list(LOC)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "\ud800"])
def test_unstorable_values_are_refused(value: Any) -> None:
    with pytest.raises(ValidationFailed):
        encode({"v": value}, field=LOC, max_bytes=1000)


def test_size_is_counted_in_utf8_bytes() -> None:
    assert encode("é" * 4, field=LOC, max_bytes=10) == '"éééé"'  # 8 bytes + 2 quotes
    with pytest.raises(PayloadTooLarge) as caught:
        encode("é" * 5, field=LOC, max_bytes=10)
    assert caught.value.extra == {"limit_bytes": 10, "size_bytes": 12}


def test_truncation_never_splits_a_character() -> None:
    assert truncate_utf8("abc", 3) == "abc"
    assert truncate_utf8("aé", 2) == "a"
    assert truncate_utf8("€€", 5) == "€"


@pytest.mark.parametrize("value", [None, {}, [], 0, "", {"a": [1, None]}])
def test_every_value_is_written_as_the_json_encoder_writes_it(value: Any) -> None:
    assert encode(value, field=LOC, max_bytes=1000) == json.dumps(value, separators=(",", ":"))
