"""The parts of the docs generated from the code: the Security page's scope table, the
request bodies' field tables of docs/api/*.md (from openapi/openapi.json), and the SQL
functions' signatures of docs/workflows/transactional.md (from a migrated database).

`make docs-tables` (`python -m tests.docs_tables`) writes the tables; the tests fail
when one falls behind (tests/processes/test_readme.py, tests/unit/test_docs_tables.py).
The signatures need a database: tests/db/test_docs_signatures.py compares them and, when
they differ, prints the block to paste.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.core.names import PATTERN_RULES
from app.keys import scope_table
from app.main import create_app

REPO = Path(__file__).resolve().parents[1]
SECURITY = REPO / "docs" / "security.md"
TRANSACTIONAL = REPO / "docs" / "workflows" / "transactional.md"
OPENAPI = REPO / "openapi" / "openapi.json"
API_PAGES = sorted((REPO / "docs" / "api").glob("*.md"))
_BLOCK = re.compile(r"(<!-- scopes:begin -->\n).*?(<!-- scopes:end -->)", re.DOTALL)
_SIGNATURES = re.compile(r"(<!-- sql-signatures:begin -->\n).*?(<!-- sql-signatures:end -->)", re.S)
_FIELDS = re.compile(r"(<!-- fields:(\w+):begin -->\n).*?(<!-- fields:\2:end -->)", re.S)
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


# ---- request bodies' field tables -------------------------------------------------------

_DEFAULT = re.compile(r"^Default: (.+?)\.(?:\s+|$)")
_REF = "#/components/schemas/"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _range(low: float | None, high: float | None, unit: str = "") -> str:
    if low is None and high is None:
        return ""
    if low is None:
        return f"up to {_number(high or 0)}{unit}"
    if high is None:
        return f"at least {_number(low)}{unit}"
    return f"{_number(low)}..{_number(high)}{unit}"


def _bounds(schema: dict[str, Any]) -> str:
    """A property's type and bounds in words, from its JSON schema."""
    variants = [v for v in schema.get("anyOf", [schema]) if v.get("type") != "null"]
    if len(variants) != 1:
        return ""
    kind = variants[0]
    if "enum" in kind:
        return " or ".join(f"`{value}`" for value in kind["enum"])
    match kind.get("type"):
        case "integer" | "number" as number:
            limits = _range(kind.get("minimum"), kind.get("maximum"))
            return f"{number} {limits}".strip()
        case "string" if "pattern" in kind:
            return PATTERN_RULES.get(kind["pattern"], "a name").removeprefix("must be ")
        case "string" if kind.get("format") == "date-time":
            return "a timestamp"
        case "string":
            return _range(kind.get("minLength"), kind.get("maxLength"), " characters")
        case "array":
            unit = " names" if "pattern" in kind.get("items", {}) else " items"
            return _range(kind.get("minItems"), kind.get("maxItems"), unit)
    return ""


def _sentence_part(text: str) -> str:
    """`text` to follow a semicolon: "Higher is …" becomes "higher is …" (not "JSON")."""
    text = text.rstrip(".")
    return text[0].lower() + text[1:] if text[:2].istitle() else text


def _rows(spec: dict[str, Any], name: str, prefix: str = "") -> list[tuple[str, str, str]]:
    """(field, default, bounds and meaning) of each property of schema `name`, the
    properties of an object it holds (`error.type`) after that object's own row."""
    schemas = spec["components"]["schemas"]
    schema = schemas[name]
    rows = []
    for field, prop in schema["properties"].items():
        description = prop.get("description", "")
        default = _DEFAULT.match(description)
        if default:
            description = description[default.end() :]
            shown = default.group(1)
        elif "default" in prop:
            shown = f"`{json.dumps(prop['default'])}`"
        elif field in schema.get("required", ()):
            shown = "required"
        elif any(v.get("type") == "null" for v in prop.get("anyOf", ())) or not (
            {"type", "anyOf", "$ref"} & prop.keys()
        ):  # nullable, or any JSON
            shown = "`null`"
        else:
            shown = "—"
        words = "; ".join(filter(None, (_bounds(prop), _sentence_part(description))))
        refs = [v["$ref"] for v in prop.get("anyOf", [prop]) if "$ref" in v]
        inner = refs[0].removeprefix(_REF) if refs else None
        if inner is None or words:
            rows.append((f"{prefix}{field}", shown, words))
        if inner is not None:
            rows += _rows(spec, inner, f"{prefix}{field}.")
    return rows


def field_table(spec: dict[str, Any], name: str) -> str:
    """The Markdown table of the fields of request body schema `name`."""
    lines = ["| Field | Default | Bounds and meaning |", "| --- | --- | --- |"]
    lines += [
        f"| `{field}` | {default} | {words} |".replace("|  |", "| |")
        for field, default, words in _rows(spec, name)
    ]
    return "\n".join(lines) + "\n"


def with_field_tables(text: str, spec: dict[str, Any]) -> str:
    """`text` with each `<!-- fields:Schema:begin/end -->` table generated afresh."""
    return _FIELDS.sub(lambda m: m.group(1) + field_table(spec, m.group(2)) + m.group(3), text)


def field_tables(text: str) -> dict[str, str]:
    """Each field table in `text`, by schema name."""
    return {m.group(2): m.group(0) for m in _FIELDS.finditer(text)}


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
    spec = json.loads(OPENAPI.read_text(encoding="utf-8"))
    for page in API_PAGES:
        text = page.read_text(encoding="utf-8")
        fresh = with_field_tables(text, spec)
        if fresh != text:
            page.write_text(fresh, encoding="utf-8")
            print(f"updated the field tables in {page.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
