"""What an API key may do: its scopes, defined once for the schemas, the checks and the CLI.

`enqueue` creates jobs; `work` leases, heartbeats, completes and fails them; `read`
gets and lists jobs and queue figures; `admin` does all of these, acts on jobs and
queues, and manages keys.
"""

from __future__ import annotations

from typing import Literal, get_args

Scope = Literal["enqueue", "work", "read", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
