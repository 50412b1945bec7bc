"""Splitting a migration's SQL script into statements (`app.db.sqlscript`)."""

from __future__ import annotations

from app.db.sqlscript import statements

SCRIPT = """\
-- a header comment;
CREATE TABLE t (id int);

-- a comment that ends with a semicolon;
-- and goes on
DO $$
BEGIN
    PERFORM 1;
END
$$;
  -- indented, then a statement over two lines
SELECT 1,
       2;
"""


def test_statements_split_at_line_ends_outside_dollar_quotes() -> None:
    assert statements(SCRIPT) == [
        "CREATE TABLE t (id int)",
        "DO $$\nBEGIN\n    PERFORM 1;\nEND\n$$",
        "SELECT 1,\n       2",
    ]


def test_a_script_of_comments_has_no_statement() -> None:
    assert statements("\n-- only;\n\n-- comments\n") == []
