"""Named SQL: `.sql` files of statements written with `:name` parameters, run on asyncpg
as `$n` prepared statements.

Each domain keeps its statements in `.sql` files beside its repository (`queries.sql`,
or a few files by what their statements do), in this form:

    -- name: lease
    -- Claim up to `max_jobs` due jobs from the given queues for one worker.
    WITH picked AS (...)
    UPDATE jobq.jobs ...;

A statement reads whole and runs in psql once its parameters are set there
(`\\set max_jobs 10`, `\\set queues '''{emails}'''`: psql puts the value in as written).
Comments stay in the file; the server gets the statement without them.

The hot paths hand each statement straight to the pooled asyncpg connection: one
round trip, prepared once per connection (asyncpg's statement cache), no SQLAlchemy
execution or result layer per call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# `:name`, but not the second colon of a `::type` cast.
_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
# `$n` as compile_sql writes it.
_POSITIONAL = re.compile(r"\$(\d+)(?!\d)")
# A comment to the end of the line, or a quoted literal or identifier (kept as it is).
_COMMENT_OR_QUOTED = re.compile(r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement in asyncpg's form, and the names of its `$1`, `$2`, … parameters."""

    name: str
    purpose: str
    sql: str
    names: tuple[str, ...]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments for `params` (KeyError names a missing one)."""
        return [params[name] for name in self.names]

    def with_number(self, name: str, value: int) -> Statement:
        """This statement with parameter `name` written in as the integer `value`, the
        later parameters renumbered: a plan PostgreSQL caches then knows it (a LIMIT)."""
        if type(value) is not int:  # never text, nor a bool
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        index = self.names.index(name) + 1

        def renumber(match: re.Match[str]) -> str:
            number = int(match.group(1))
            if number == index:
                return str(value)
            return f"${number - 1 if number > index else number}"

        sql = _outside_quotes(self.sql, lambda text: _POSITIONAL.sub(renumber, text))
        names = tuple(n for n in self.names if n != name)
        return Statement(self.name, self.purpose, sql, names)


def _without_comments(text: str) -> str:
    def keep_quoted(match: re.Match[str]) -> str:
        return "" if match.group(0).startswith("--") else match.group(0)

    stripped = _COMMENT_OR_QUOTED.sub(keep_quoted, text)
    return "\n".join(line.rstrip() for line in stripped.splitlines() if line.strip())


def compile_sql(name: str, text: str, purpose: str = "") -> Statement:
    """Compile `text`'s `:name` parameters to `$n`, a name used twice keeping its number."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        parameter = match.group(1)
        if parameter not in names:
            names.append(parameter)
        return f"${names.index(parameter) + 1}"

    body = _without_comments(text).rstrip().removesuffix(";")
    compiled = _outside_quotes(body, lambda part: _PARAMETER.sub(number, part))
    return Statement(name, purpose, compiled, tuple(names))


def _outside_quotes(sql: str, change: Callable[[str], str]) -> str:
    """`sql` with `change` applied to its text outside quoted literals and identifiers."""

    def apply(match: re.Match[str]) -> str:
        part = match.group(0)
        return part if part[0] in "'\"" else change(part)

    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^'\"]+", apply, sql)


def load(path: Path) -> dict[str, Statement]:
    """Every statement of a `.sql` file, by name (see the module docstring for the form)."""
    text = path.read_text(encoding="utf-8")
    headers = list(_HEADER.finditer(text))
    statements: dict[str, Statement] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name = header.group(1)
        chunk = text[header.end() : following.start() if following else len(text)]
        lines = chunk.strip("\n").splitlines()
        purpose_lines = []
        while lines and lines[0].startswith("--"):
            purpose_lines.append(lines.pop(0).removeprefix("--").strip())
        if name in statements:
            raise ValueError(f"{path.name}: statement {name!r} is defined twice")
        if not purpose_lines:
            raise ValueError(f"{path.name}: statement {name!r} has no one-line purpose")
        statements[name] = compile_sql(name, "\n".join(lines), " ".join(purpose_lines))
    return statements


class Queries:
    """The statements of a domain's `.sql` files, by name; `queries["lease"]` fails at
    import for a typo, and a name defined in two of the files is refused."""

    def __init__(self, *paths: Path) -> None:
        self.paths = paths
        self.statements: dict[str, Statement] = {}
        for path in paths:
            for name, statement in load(path).items():
                if name in self.statements:
                    raise ValueError(f"{path.name}: statement {name!r} is defined twice")
                self.statements[name] = statement

    def __getitem__(self, name: str) -> Statement:
        try:
            return self.statements[name]
        except KeyError:
            files = ", ".join(path.name for path in self.paths)
            raise KeyError(f"no statement {name!r} in {files}") from None
