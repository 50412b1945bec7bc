"""What a log line may show of a request's path: lease tokens cut to their job id.

A lease token (`app.jobs.tokens`) is `<job id>-<uuid>`; the uuid is its holder's secret.
Any path segment of that shape is cut, whether or not a route matched the path or the
request was let in: a refused request's path is logged too. The uuid may be written in
any form Python's `uuid.UUID` reads (dashes, braces, a `urn:uuid:` prefix), as the
service itself would accept it.
"""

from __future__ import annotations

import re
import uuid

_SEGMENT = re.compile(r"(?<=/)([0-9]+)-([^/]+)")


def _cut(match: re.Match[str]) -> str:
    try:
        uuid.UUID(match.group(2))
    except ValueError:
        return match.group(0)
    return f"{match.group(1)}-…"


def cut_tokens(path: str) -> str:
    """`path` with every token-shaped segment cut to its job id (`/v1/leases/7-…/fail`)."""
    return _SEGMENT.sub(_cut, path) if "-" in path else path
