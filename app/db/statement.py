"""Named SQL written with `:name` parameters, run on asyncpg as `$n` prepared statements.

The hot paths hand each statement straight to the pooled asyncpg connection: one
round trip, prepared once per connection (asyncpg's statement cache), no SQLAlchemy
execution or result layer per call. jsonb comes back decoded (the pool's connections
carry SQLAlchemy's jsonb codec).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# `:name`, but not the second colon of a `::type` cast.
_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement in asyncpg's form, and the names of its `$1`, `$2`, … parameters."""

    sql: str
    names: tuple[str, ...]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments for `params` (KeyError names a missing one)."""
        return [params[name] for name in self.names]


def sql(text: str) -> Statement:
    """Compile `text`'s `:name` parameters to `$n`, a name used twice keeping its number."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return Statement(_PARAMETER.sub(number, text), tuple(names))
