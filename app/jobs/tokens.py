"""Lease tokens: `<job id>-<random uuid>`.

The job id lets every lease transition find its row by primary key, and lets a stale
token be explained (superseded, expired, already finished) from the job's history.
The uuid is the fence: a new one is drawn for every attempt.
"""

from __future__ import annotations

import re
import uuid

from app.core.errors import LeaseNotFound
from app.core.names import MAX_BIGINT

# What `uuid.UUID` is given: 32 hex digits once any hyphens are gone (it would also take
# braces, a `urn:uuid:` prefix, spaces and underscores, which jobq never issues).
_HEX_32 = re.compile(r"[0-9a-fA-F]{32}")


def format_token(job_id: int, lease_uuid: object) -> str:
    """The token a worker sees for this lease."""
    lease = lease_uuid if isinstance(lease_uuid, uuid.UUID) else uuid.UUID(str(lease_uuid))
    return f"{job_id}-{lease.hex}"


def parse_token(token: str) -> tuple[int, uuid.UUID]:
    """(job id, lease uuid), or `LeaseNotFound` for anything jobq never issued."""
    job_part, _, uuid_part = token.partition("-")
    try:
        job_id = int(job_part)
    except ValueError:
        raise LeaseNotFound(f"no lease {token!r} was ever issued") from None
    digits = uuid_part.replace("-", "")
    if (
        not 1 <= job_id <= MAX_BIGINT
        or not (job_part.isascii() and job_part.isdigit())
        or _HEX_32.fullmatch(digits) is None
    ):
        raise LeaseNotFound(f"no lease {token!r} was ever issued")
    return job_id, uuid.UUID(hex=digits)
