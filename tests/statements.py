"""Running a named statement by hand in a test, from a table of values that several
statements share (each takes the entries its parameters name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.db.statement import P, Statement, fields_of


def params_of(statement: Statement[P], values: Mapping[str, Any]) -> P:
    """`statement`'s parameters, from the entries of `values` its fields name."""
    assert statement.params is not None, f"{statement.name} is not bound to a type"
    kind = statement.params
    return kind(**{name: values[name] for name in fields_of(kind)})


def args_of(statement: Statement[P], values: Mapping[str, Any]) -> Sequence[Any]:
    """The positional arguments `statement.sql` takes, from `values` (see `params_of`)."""
    return statement.args(params_of(statement, values))
