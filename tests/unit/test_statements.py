"""The `.sql` loader: names, purposes, comments and parameters."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from app.db.statement import NO_PARAMS, NoParams, Queries, compile_sql, load


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "queries.sql"
    path.write_text(text)
    return path


def test_each_statement_has_its_name_purpose_and_numbered_parameters(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        """-- A header comment, not a statement.

-- name: first
-- Does the first thing,
-- in two lines.
SELECT :a, :b, :a  -- a comment with :not_a_parameter
  FROM t WHERE x = ':quoted' AND y::text = :b;

-- name: second
-- Does the second thing.
SELECT 1;
""",
    )
    statements = load(path)
    assert list(statements) == ["first", "second"]
    first = statements["first"]
    assert first.purpose == "Does the first thing, in two lines."
    assert first.names == ("a", "b")
    assert first.sql == "SELECT $1, $2, $1\n  FROM t WHERE x = ':quoted' AND y::text = $2"
    assert statements["second"].sql == "SELECT 1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: a\n-- One.\nSELECT 1;\n-- name: a\n-- Two.\nSELECT 2;\n", "defined twice"),
        ("-- name: a\nSELECT 1;\n", "no one-line purpose"),
    ],
)
def test_a_file_without_names_or_purposes_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load(_file(tmp_path, text))


def test_an_unknown_statement_name_fails_at_import(tmp_path: Path) -> None:
    queries = Queries(_file(tmp_path, "-- name: lease\n-- Lease.\nSELECT 1;\n"))
    assert queries["lease"].sql == "SELECT 1"
    with pytest.raises(KeyError, match=r"no statement 'leese' in queries\.sql"):
        queries["leese"]


def test_a_name_in_two_files_of_a_domain_is_refused(tmp_path: Path) -> None:
    first = _file(tmp_path, "-- name: lease\n-- Lease.\nSELECT 1;\n")
    second = tmp_path / "more.sql"
    second.write_text("-- name: finish\n-- Finish.\nSELECT 2;\n")
    assert set(Queries(first, second).statements) == {"lease", "finish"}
    second.write_text(second.read_text() + "-- name: lease\n-- Again.\nSELECT 3;\n")
    with pytest.raises(ValueError, match=r"more\.sql: statement 'lease' is defined twice"):
        Queries(first, second)


class B(NamedTuple):
    b: int


class AB(NamedTuple):
    a: int
    b: int


class ABC(NamedTuple):
    a: int
    b: int
    c: int


def test_arguments_follow_the_parameters_order() -> None:
    statement = compile_sql("s", "SELECT :b, :a, :b").bound(AB)
    assert statement.params is AB
    assert statement.args(AB(a=1, b=2)) == (2, 1)
    assert compile_sql("s", "SELECT :b").bound(B).args(B(5)) == (5,)
    assert compile_sql("s", "SELECT 1").bound(NoParams).args(NO_PARAMS) == ()


def test_a_statement_is_bound_to_a_named_tuple_of_exactly_its_parameters() -> None:
    statement = compile_sql("s", "SELECT :a, :c")
    with pytest.raises(ValueError, match=r"'s' and AB: no field for c; fields it does not use: b"):
        statement.bound(AB)
    with pytest.raises(ValueError, match=r"'s' and ABC: fields it does not use: b"):
        statement.bound(ABC)
    with pytest.raises(TypeError, match="tuple is not a NamedTuple"):
        statement.bound(tuple)


def test_a_parameter_written_in_as_a_number_renumbers_the_others() -> None:
    statement = compile_sql("s", "SELECT :a, '$2 :b', :b, :c, :a LIMIT :b").bound(ABC)
    assert statement.sql == "SELECT $1, '$2 :b', $2, $3, $1 LIMIT $2"
    numbered = statement.with_number("b", 100)
    assert numbered.sql == "SELECT $1, '$2 :b', 100, $2, $1 LIMIT 100"  # quoted text kept
    assert numbered.names == ("a", "c")
    assert numbered.params is ABC  # the same parameters, the one written in not read
    assert numbered.args(ABC(a=1, b=2, c=3)) == (1, 3)
    assert statement.with_number("a", 5).sql == "SELECT 5, '$2 :b', $1, $2, 5 LIMIT $1"


def test_a_fragment_is_put_in_where_statements_name_it(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        """-- fragment: claim
-- What a claim sets.
   SET state = 'running',  -- a comment, gone
       worker_id = :worker_id

-- name: one
-- The first.
UPDATE jobs j
{claim}
 WHERE id = :id AND note = '{claim}';  -- {claim} in a comment stays out

-- name: two
-- The second.
UPDATE jobs {claim} WHERE queue = :queue;
""",
    )
    statements = load(path)
    assert list(statements) == ["one", "two"]
    one = statements["one"]
    assert one.sql == (
        "UPDATE jobs j\n   SET state = 'running',\n       worker_id = $1\n"
        " WHERE id = $2 AND note = '{claim}'"
    )
    assert one.names == ("worker_id", "id")
    assert statements["two"].names == ("worker_id", "queue")


_F = "-- fragment: f\n-- F.\nSELECT 1\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: a\n-- A.\nSELECT {g};\n", r"statement 'a': \{g\} is not a fragment of the file"),
        (_F + "-- name: a\n-- A.\nSELECT 2;\n", "fragment 'f' is put in no statement"),
        ("-- fragment: f\nSELECT 1\n-- name: a\n-- A.\nSELECT {f};\n", "'f' has no one-line"),
        (_F + "-- name: f\n-- A.\nSELECT {f};\n", "statement 'f' is defined twice"),
    ],
    ids=["unknown", "unused", "no-purpose", "name-taken"],
)
def test_a_fragment_must_be_known_used_and_described(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load(_file(tmp_path, text))


@pytest.mark.parametrize("value", ["1; DROP TABLE t", True, 1.5])
def test_only_an_int_is_written_in(value: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        compile_sql("s", "SELECT :a").with_number("a", value)  # type: ignore[arg-type]
