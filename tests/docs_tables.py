"""The parts of the docs generated from the code: the Security page's scope table, the
request bodies' field tables of docs/api/*.md (from openapi/openapi.json), and the SQL
functions' signatures of docs/workflows/transactional.md (from a migrated database).

`make docs-tables` (`python -m tests.docs_tables`) writes the tables; the tests fail
when one falls behind (tests/processes/test_readme.py, tests/unit/test_docs_tables.py).
The signatures need a database: tests/db/test_docs_signatures.py compares them and, when
they differ, prints the block to paste.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

from app.keys import scope_table
from app.main import create_app

REPO = Path(__file__).resolve().parents[1]
SECURITY = REPO / "docs" / "security.md"
TRANSACTIONAL = REPO / "docs" / "workflows" / "transactional.md"
OPENAPI = REPO / "openapi" / "openapi.json"
API_PAGES = sorted((REPO / "docs" / "api").glob("*.md"))
_BLOCK = re.compile(r"(<!-- scopes:begin -->\n).*?(<!-- scopes:end -->)", re.DOTALL)
_SIGNATURES = re.compile(r"(<!-- sql-signatures:begin -->\n).*?(<!-- sql-signatures:end -->)", re.S)
SIGNATURE_WIDTH = 88


def current(text: str) -> str:
    """The scope table as `text` has it."""
    match = _BLOCK.search(text)
    assert match is not None, "the <!-- scopes:begin/end --> markers are missing"
    return text[match.end(1) : match.start(2)]


def rewritten(text: str) -> str:
    """`text` with its scope table generated afresh from the routes."""
    table = scope_table(create_app())
    return _BLOCK.sub(lambda m: m.group(1) + table + m.group(2), text)


# ---- the SQL functions' signatures ------------------------------------------------------

# jobq's functions a producer calls, as `pg_get_function_arguments`/`_result` give them
SIGNATURES_QUERY = """
SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'jobq' AND p.proname = ANY($1::text[])
 ORDER BY array_position($1::text[], p.proname::text)
"""
DOCUMENTED_FUNCTIONS = ("enqueue", "enqueue_many")


def _short(sql: str) -> str:
    """PostgreSQL's spelling, shortened as people write it: no casts on defaults."""
    sql = re.sub(r"('(?:[^']|'')*'|NULL)::[a-z ]+(?:\[\])?", r"\1", sql)
    return sql.replace("timestamp with time zone", "timestamptz").replace("TABLE(", "TABLE (")


def _arguments(sql: str) -> list[str]:
    """The arguments of `pg_get_function_arguments`, split at the commas between them."""
    return [part.strip() for part in re.findall(r"(?:'(?:[^']|'')*'|[^,'])+", sql)]


def signature_block(functions: Iterable[tuple[str, str, str]]) -> str:
    """A ```sql block with each function's arguments and result, wrapped between
    arguments."""
    lines = []
    for name, arguments, result in functions:
        line = f"jobq.{name}("
        indent = " " * len(line)
        parts = _arguments(_short(arguments))
        for number, part in enumerate(parts):
            part += ")" if number == len(parts) - 1 else ","
            if line.strip() and len(line) + len(part) + 1 > SIGNATURE_WIDTH:
                lines.append(line.rstrip())
                line = indent
            line += part if line.endswith(("(", " ")) else " " + part
        lines += [line, f"  RETURNS {_short(result)}", ""]
    return "```sql\n" + "\n".join(lines[:-1]) + "\n```\n"


def current_signatures(text: str) -> str:
    """The signatures block as `text` has it."""
    match = _SIGNATURES.search(text)
    assert match is not None, "the <!-- sql-signatures:begin/end --> markers are missing"
    return text[match.end(1) : match.start(2)]


def with_signatures(text: str, block: str) -> str:
    return _SIGNATURES.sub(lambda m: m.group(1) + block + m.group(2), text)


def main() -> int:
    text = SECURITY.read_text(encoding="utf-8")
    fresh = rewritten(text)
    if fresh != text:
        SECURITY.write_text(fresh, encoding="utf-8")
        print("updated the scope table in docs/security.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
