"""The `.sql` loader: names, purposes, comments and parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.statement import Queries, compile_sql, load


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


def test_arguments_follow_the_parameters_order() -> None:
    statement = compile_sql("s", "SELECT :b, :a, :b")
    assert statement.args({"a": 1, "b": 2, "unused": 3}) == [2, 1]
    with pytest.raises(KeyError):
        statement.args({"a": 1})


def test_a_parameter_written_in_as_a_number_renumbers_the_others() -> None:
    statement = compile_sql("s", "SELECT :a, '$2 :b', :b, :c, :a LIMIT :b")
    assert statement.sql == "SELECT $1, '$2 :b', $2, $3, $1 LIMIT $2"
    numbered = statement.with_number("b", 100)
    assert numbered.sql == "SELECT $1, '$2 :b', 100, $2, $1 LIMIT 100"  # quoted text kept
    assert numbered.names == ("a", "c")
    assert numbered.args({"a": 1, "b": 2, "c": 3}) == [1, 3]
    assert statement.with_number("a", 5).sql == "SELECT 5, '$2 :b', $1, $2, 5 LIMIT $1"


@pytest.mark.parametrize("value", ["1; DROP TABLE t", True, 1.5])
def test_only_an_int_is_written_in(value: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        compile_sql("s", "SELECT :a").with_number("a", value)  # type: ignore[arg-type]
