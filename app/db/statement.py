"""Named SQL: `.sql` files of statements written with `:name` parameters, run on asyncpg
as `$n` prepared statements, each with a typed record of its parameters.

Each domain keeps its statements in `.sql` files beside its repository (`queries.sql`,
or a few files by what their statements do), in this form:

    -- name: lease
    -- Claim up to `max_jobs` due jobs from the given queues for one worker.
    WITH picked AS (...)
    UPDATE jobq.jobs ...;

A statement reads whole and runs in psql once its parameters are set there
(`\\set max_jobs 10`, `\\set queues '''{emails}'''`: psql puts the value in as written).
Comments stay in the file; the server gets the statement without them.

A clause that several statements of a file share is written once, as a fragment, and
put in where a statement names it in braces (`{claim}`) when the file is loaded:

    -- fragment: claim
    -- What a claim sets on each job it takes.
       SET state = 'running', ...

The server gets each statement whole; in psql, paste the fragment in its place.

Each statement's parameters are a `NamedTuple` of its own (`LeaseParams`, in the
domain's `params.py`), bound to it in the repository:
`LEASE = QUERIES.bind("lease", LeaseParams)`, a `Statement[LeaseParams]` that
`Database.fetch` runs only with a `LeaseParams`. So a misspelt or missing parameter is
mypy's error at the call, not a `KeyError` at run time; and `bind` refuses a type whose
fields are not exactly the statement's `:names` (tests/unit/test_statement_params.py
holds every repository's statements to it).

Named tuples, rather than TypedDicts or frozen dataclasses:
- mypy checks each keyword, and each field left out, as for a call; a field may have a
  default (a TypedDict's cannot), and the value's type is its own at run time, not any
  dict's;
- they are immutable and cheap: built in C from values in order (`rows.builder`, as a
  batch of acks is), their fields read in C (`operator.attrgetter`: one call for a
  statement's arguments), where a frozen dataclass runs Python for each field it sets
  (the hot paths build one per statement);
- rows come back as named tuples too (`app/jobs/rows.py`): one kind of record crosses
  the database boundary, each way.

The hot paths hand each statement straight to the pooled asyncpg connection: one
round trip, prepared once per connection (asyncpg's statement cache), no SQLAlchemy
execution or result layer per call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

# `:name`, but not the second colon of a `::type` cast.
_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
# `$n` as compile_sql writes it.
_POSITIONAL = re.compile(r"\$(\d+)(?!\d)")
# A comment to the end of the line, or a quoted literal or identifier (kept as it is).
_COMMENT_OR_QUOTED = re.compile(r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_HEADER = re.compile(r"^-- (name|fragment): ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
# `{name}`: where a statement puts in a fragment of its file.
_FRAGMENT = re.compile(r"\{([a-z_][a-z0-9_]*)\}")

# A statement's parameters: a NamedTuple whose fields are its `:names`.
P = TypeVar("P", bound=tuple[Any, ...])
B = TypeVar("B", bound=tuple[Any, ...])  # the type a statement is bound to


class NoParams(NamedTuple):
    """The parameters of a statement that takes none."""


NO_PARAMS = NoParams()


def _getter(names: tuple[str, ...]) -> Callable[[Any], Sequence[Any]]:
    """What reads `names` off a parameters record, in order: one C call."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda params: (one(params),)
    return lambda params: ()


@dataclass(frozen=True, slots=True)
class Statement(Generic[P]):
    """A statement in asyncpg's form, the names of its `$1`, `$2`, … parameters, and
    (once bound: `Queries.bind`) the NamedTuple type they come in."""

    name: str
    purpose: str
    sql: str
    names: tuple[str, ...]
    params: type[P] | None = None
    _get: Callable[[P], Sequence[Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_get", _getter(self.names))

    def args(self, params: P) -> Sequence[Any]:
        """The positional arguments: `params`' fields in the order of `names`."""
        return self._get(params)

    def bound(self, params: type[B]) -> Statement[B]:
        """This statement, run with parameters of type `params`: a NamedTuple whose
        fields are exactly its `:names` (else ValueError)."""
        differs = _mismatch(self.names, fields_of(params))
        if differs is not None:
            raise ValueError(f"statement {self.name!r} and {params.__name__}: {differs}")
        return Statement(self.name, self.purpose, self.sql, self.names, params)

    def with_number(self, name: str, value: int) -> Statement[P]:
        """This statement with parameter `name` written in as the integer `value`, the
        later parameters renumbered: a plan PostgreSQL caches then knows it (a LIMIT).
        Its parameters' type is the same (the field written in is not read)."""
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
        return Statement(self.name, self.purpose, sql, names, self.params)


def fields_of(params: type[tuple[Any, ...]]) -> tuple[str, ...]:
    """A NamedTuple type's fields (TypeError for any other type)."""
    try:
        fields: tuple[str, ...] = params._fields  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"{params.__name__} is not a NamedTuple") from None
    return fields


def _mismatch(names: Sequence[str], fields: Sequence[str]) -> str | None:
    """How a statement's `:names` and its parameters' fields differ; None: they do not."""
    unbound = [n for n in names if n not in fields]
    unused = [f for f in fields if f not in names]
    parts = []
    if unbound:
        parts.append(f"no field for {', '.join(unbound)}")
    if unused:
        parts.append(f"fields it does not use: {', '.join(unused)}")
    return "; ".join(parts) or None


def _without_comments(text: str) -> str:
    def keep_quoted(match: re.Match[str]) -> str:
        return "" if match.group(0).startswith("--") else match.group(0)

    stripped = _COMMENT_OR_QUOTED.sub(keep_quoted, text)
    return "\n".join(line.rstrip() for line in stripped.splitlines() if line.strip())


def compile_sql(name: str, text: str, purpose: str = "") -> Statement[Any]:
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


def _put_in(text: str, fragments: dict[str, str], used: set[str]) -> str:
    """`text` with each `{fragment}` (outside comments and quotes) put in its place."""

    def fragment(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in fragments:
            raise ValueError(f"{{{name}}} is not a fragment of the file")
        used.add(name)
        return fragments[name]

    return _outside_quotes(_without_comments(text), lambda part: _FRAGMENT.sub(fragment, part))


def load(path: Path) -> dict[str, Statement[Any]]:
    """Every statement of a `.sql` file, by name, its fragments put in (see the module
    docstring for the form)."""
    text = path.read_text(encoding="utf-8")
    headers = list(_HEADER.finditer(text))
    fragments: dict[str, str] = {}
    bodies: dict[str, tuple[str, str]] = {}  # each statement's purpose and text
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        kind, name = header.groups()
        what = "statement" if kind == "name" else "fragment"
        chunk = text[header.end() : following.start() if following else len(text)]
        lines = chunk.strip("\n").splitlines()
        purpose_lines = []
        while lines and lines[0].startswith("--"):
            purpose_lines.append(lines.pop(0).removeprefix("--").strip())
        if name in bodies or name in fragments:
            raise ValueError(f"{path.name}: {what} {name!r} is defined twice")
        if not purpose_lines:
            raise ValueError(f"{path.name}: {what} {name!r} has no one-line purpose")
        if what == "fragment":
            fragments[name] = _without_comments("\n".join(lines)).rstrip().removesuffix(";")
        else:
            bodies[name] = (" ".join(purpose_lines), "\n".join(lines))
    used: set[str] = set()
    statements: dict[str, Statement[Any]] = {}
    for name, (purpose, body) in bodies.items():
        try:
            composed = _put_in(body, fragments, used)
        except ValueError as exc:
            raise ValueError(f"{path.name}: statement {name!r}: {exc}") from None
        statements[name] = compile_sql(name, composed, purpose)
    for name in fragments.keys() - used:
        raise ValueError(f"{path.name}: fragment {name!r} is put in no statement")
    return statements


class Queries:
    """The statements of a domain's `.sql` files, by name; `queries["lease"]` fails at
    import for a typo, and a name defined in two of the files is refused."""

    def __init__(self, *paths: Path) -> None:
        self.paths = paths
        self.statements: dict[str, Statement[Any]] = {}
        for path in paths:
            for name, statement in load(path).items():
                if name in self.statements:
                    raise ValueError(f"{path.name}: statement {name!r} is defined twice")
                self.statements[name] = statement

    def __getitem__(self, name: str) -> Statement[Any]:
        try:
            return self.statements[name]
        except KeyError:
            files = ", ".join(path.name for path in self.paths)
            raise KeyError(f"no statement {name!r} in {files}") from None

    def bind(self, name: str, params: type[P]) -> Statement[P]:
        """Statement `name`, run with parameters of type `params` (`Statement.bound`): a
        repository binds each of its statements so, at import."""
        return self[name].bound(params)
