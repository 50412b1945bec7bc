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


def functions_created(script: str, *names: str) -> list[str]:
    """The statements of a migration's script that (re)create the `jobq` functions
    `names`, as CREATE FUNCTION: what a later migration's downgrade runs to make again
    the functions it dropped."""
    found = []
    for statement in statements(script):
        lines = statement.splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments above it
        code = "\n".join(lines).replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", 1)
        if any(code.startswith(f"CREATE FUNCTION jobq.{name}(") for name in names):
            found.append(code)
    return found
