"""The parts of the docs generated from the code: the Security page's scope table.

`make docs-tables` (`python -m tests.docs_tables`) writes them; `tests/processes/test_readme.py`
fails when one falls behind.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from app.keys import scope_table
from app.main import create_app

SECURITY = Path(__file__).resolve().parents[1] / "docs" / "security.md"
_BLOCK = re.compile(r"(<!-- scopes:begin -->\n).*?(<!-- scopes:end -->)", re.DOTALL)


def current(text: str) -> str:
    """The scope table as `text` has it."""
    match = _BLOCK.search(text)
    assert match is not None, "the <!-- scopes:begin/end --> markers are missing"
    return text[match.end(1) : match.start(2)]


def rewritten(text: str) -> str:
    """`text` with its scope table generated afresh from the routes."""
    table = scope_table(create_app())
    return _BLOCK.sub(lambda m: m.group(1) + table + m.group(2), text)


def main() -> int:
    text = SECURITY.read_text(encoding="utf-8")
    fresh = rewritten(text)
    if fresh != text:
        SECURITY.write_text(fresh, encoding="utf-8")
        print("updated the scope table in docs/security.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
