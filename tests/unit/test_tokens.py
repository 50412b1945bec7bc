"""Lease tokens: what `parse_token` takes back of what `format_token` issued, and what it
refuses as never issued."""

from __future__ import annotations

import uuid

import pytest

from app.core.errors import LeaseNotFound
from app.core.names import MAX_BIGINT
from app.jobs.tokens import format_token, parse_token

LEASE = uuid.UUID("07ff0625-9c5e-4b7c-9d1e-0f2a3b4c5d6e")


def test_an_issued_token_parses_back_to_its_job_and_lease() -> None:
    job_id, lease = parse_token(format_token(42, LEASE))
    assert (job_id, lease) == (42, LEASE)
    assert isinstance(lease, uuid.UUID)
    assert hash(lease) == hash(LEASE) and str(lease) == str(LEASE)
    assert {(42, LEASE)} == {(job_id, lease)}  # the acks' duplicate check


@pytest.mark.parametrize(
    "uuid_part",
    [LEASE.hex.upper(), str(LEASE)],
    ids=["upper-case", "hyphenated"],
)
def test_other_spellings_of_the_same_uuid_are_the_same_lease(uuid_part: str) -> None:
    assert parse_token(f"7-{uuid_part}") == (7, LEASE)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "7",
        "7-",
        f"7-{LEASE.hex[:-1]}",  # short
        f"7-{LEASE.hex}ff",  # long
        f"7-{LEASE.hex[:-1]}g",  # not hex
        f"7-{LEASE.hex[:-1]}\u0663",  # an Arabic-Indic digit
        f"7-{{{LEASE.hex}}}",  # braces
        f"7-urn:uuid:{LEASE.hex}",
        f"7- {LEASE.hex}",
        f"0-{LEASE.hex}",
        f"-7-{LEASE.hex}",
        f"+7-{LEASE.hex}",
        f"{MAX_BIGINT + 1}-{LEASE.hex}",
        f"\u0667-{LEASE.hex}",  # int() reads it as 7
        f"x-{LEASE.hex}",
    ],
)
def test_anything_else_was_never_issued(token: str) -> None:
    with pytest.raises(LeaseNotFound):
        parse_token(token)
