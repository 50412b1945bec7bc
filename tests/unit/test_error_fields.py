"""Errors about a field name it by its path in what the service was given; the API places
it in the request (`within("body")`): the problem then reads as it always did."""

from __future__ import annotations

from app.core.errors import ConfirmationMismatch, JobNotFound, PayloadTooLarge, ValidationFailed


def test_a_field_error_is_placed_in_the_body() -> None:
    error = ValidationFailed.field(("acks", 3, "result"), "too deep", "json_too_deep")
    placed = error.within("body")
    assert placed.extra["errors"] == [
        {"loc": ["body", "acks", 3, "result"], "msg": "too deep", "type": "json_too_deep"}
    ]
    assert placed.detail == "too deep"
    assert error.extra["errors"][0]["loc"] == ["acks", 3, "result"]  # the original stays


def test_placing_keeps_the_kind_of_error() -> None:
    error = ConfirmationMismatch.field(("confirm",), "must be the queue's name", "value_error")
    placed = error.within("body")
    assert type(placed) is ConfirmationMismatch
    assert placed.extra["errors"][0]["loc"] == ["body", "confirm"]


def test_a_listed_detail_names_the_fields_from_where_they_are_placed() -> None:
    pydantic_errors = [
        {"loc": ("name",), "msg": "too long", "type": "string_too_long"},
        {"loc": (), "msg": "admin keys cannot be limited", "type": "value_error"},
    ]
    error = ValidationFailed.of(pydantic_errors)
    assert error.detail == "name: too long; admin keys cannot be limited"
    placed = error.within("body")
    assert placed.detail == "name: too long; body: admin keys cannot be limited"
    assert [e["loc"] for e in placed.extra["errors"]] == [["body", "name"], ["body"]]


def test_a_payload_too_large_names_its_field_from_the_body() -> None:
    error = PayloadTooLarge.of_field(("jobs", 2, "payload"), 70_000, 65_536)
    assert error.detail == "jobs.2.payload is 70000 bytes of JSON; the limit is 65536"
    placed = error.within("body")
    assert placed.detail == "body.jobs.2.payload is 70000 bytes of JSON; the limit is 65536"
    assert placed.extra == {"limit_bytes": 65_536, "size_bytes": 70_000}
    assert list(placed.extra) == ["limit_bytes", "size_bytes"]  # the problem's order


def test_errors_that_name_no_field_are_themselves() -> None:
    missing = JobNotFound("no job has id 7", job_id=7)
    assert missing.within("body") is missing
    too_large = PayloadTooLarge("payload is over the 10-byte limit", limit_bytes=10)
    assert too_large.within("body") is too_large
