"""SQL scripts that migrations run: split into statements, dollar-quoted bodies kept whole."""

from __future__ import annotations


def statements(script: str) -> list[str]:
    """The script's statements: each ends with `;` at the end of a line, outside `$$`;
    comment lines between statements are left out (one may end with `;`)."""
    found: list[str] = []
    current: list[str] = []
    quoted = False
    for line in script.splitlines():
        between = not "".join(current).strip()
        if between and (line.lstrip().startswith("--") or not line.strip()):
            current = []
            continue
        current.append(line)
        quoted ^= line.count("$$") % 2 == 1
        if not quoted and line.rstrip().endswith(";"):
            found.append("\n".join(current).rstrip().removesuffix(";"))
            current = []
    assert not "\n".join(current).strip(), "the script ends inside a statement"
    return found
