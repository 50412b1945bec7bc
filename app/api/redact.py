"""What a log line may show of a request's path: lease tokens cut to their job id.

A lease token (`app.jobs.tokens`) is `<job id>-<uuid>`; the uuid is its holder's secret.
Any path segment of that shape is cut, whether or not a route matched the path or the
request was let in: a refused request's path is logged too. The uuid may be written in
any form Python's `uuid.UUID` reads (dashes, braces, a `urn:uuid:` prefix): wider than
what the service accepts, since a mistyped token still carries its holder's secret.
"""

from __future__ import annotations

import uuid


def _is_uuid(text: str) -> bool:
    """Does `uuid.UUID` read `text`?"""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def cut_tokens(path: str) -> str:
    """`path` with every token-shaped segment cut to its job id (`/v1/leases/7-…/fail`):
    ASCII digits, a dash, and a uuid."""
    if "-" not in path:
        return path
    segments = path.split("/")
    for i, segment in enumerate(segments):
        job_id, dash, rest = segment.partition("-")
        if dash and job_id.isascii() and job_id.isdigit() and _is_uuid(rest):
            segments[i] = f"{job_id}-…"
    return "/".join(segments)
