"""What the audit log keeps of a request's body: names and numbers, never job data,
URLs or secrets, and never more than a bounded amount."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.keys.audit import MAX_SUMMARY_BYTES, NOT_RECORDED, summary


def _summary(body: object) -> dict[str, Any]:
    return summary(json.dumps(body).encode())


def test_settings_are_kept_as_sent() -> None:
    body = {"max_running": 5, "backoff_jitter": 0.5, "ordering": "fifo", "max_backlog": None}
    assert _summary(body) == body


def test_names_are_kept_other_text_is_not() -> None:
    body = {"name": "ingest", "scopes": ["enqueue"], "queues": ["a", "b.*"], "note": "hush"}
    assert _summary(body) == {
        "name": "ingest",
        "scopes": ["enqueue"],
        "queues": ["a", "b.*"],
        "note": NOT_RECORDED,
    }


def test_job_data_urls_and_secrets_are_opaque_whatever_their_shape() -> None:
    body = {
        "payload": {"n": 1},
        "metadata": {"name": "x"},
        "push": {
            "url": "https://h/x",
            "secrets": ["s"],
            "headers": {"a": "b"},
            "timeout_seconds": 5,
        },
    }
    assert _summary(body) == {
        "payload": NOT_RECORDED,
        "metadata": NOT_RECORDED,
        "push": {
            "url": NOT_RECORDED,
            "secrets": NOT_RECORDED,
            "headers": NOT_RECORDED,
            "timeout_seconds": 5,
        },
    }


def test_what_is_not_a_json_object_is_named_not_kept() -> None:
    assert summary(b"") == {}
    assert summary(b"{nope") == {"body": "not JSON"}
    assert summary(b'["name"]') == {"body": "not a JSON object"}


def test_a_large_summary_keeps_the_fields_names() -> None:
    body = {f"field_{i}": "x" * 100 for i in range(60)} | {"name": "n" * 150}
    kept = _summary(body | {"queues": ["q" * 150] * 20})
    assert set(kept) == {"fields"}
    assert "name" in kept["fields"] and "queues" in kept["fields"]


def test_text_postgresql_cannot_store_is_cleaned() -> None:
    kept = summary(b'{"name": "a\\u0000b\\ud800c"}')
    assert kept == {"name": "ab?c"}


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300),
        lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=200), inner),
        max_leaves=200,
    )
)
def test_any_body_gives_a_bounded_storable_summary(body: object) -> None:
    kept = summary(json.dumps(body).encode())
    text = json.dumps(kept, allow_nan=False)
    assert len(text) <= MAX_SUMMARY_BYTES
    assert "\\u0000" not in text
    text.encode("utf-8")
