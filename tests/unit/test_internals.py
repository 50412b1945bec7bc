"""No code in `app/` reaches into a dependency's internals: no private module or name is
imported from outside `app`, none of the modules below (public names, internal use) is
imported, and no attribute whose name starts with `_` is touched on anything but an
object of jobq's own making (namedtuples' `_make`, `_fields`, `_asdict` are their public
API). A reach that a measurement justifies is listed in `ALLOWED`, with where it is
guarded; docs/performance/service.md says what it buys."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

# Modules with public-looking names that their projects keep for themselves.
INTERNAL_MODULES = (
    "asyncpg.pgproto",
    "asyncpg.protocol",
    "fastapi.dependencies",
    "prometheus_client.values",
    "pydantic_core.core_schema",
    "sqlalchemy.util",
    "starlette.middleware.exceptions",
    "uvicorn.lifespan",
    "uvicorn.loops",
    "uvicorn.protocols",
)
NAMEDTUPLE_API = frozenset({"_make", "_fields", "_asdict", "_replace", "_field_defaults"})
# (file, private name): what `app/` may still touch, each with the test that guards it.
# Empty: the batched histogram update that read prometheus-client's internals bought
# about 3 % of a drained job's service CPU, below the 10 % a private path must buy.
ALLOWED: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_private_names(trees: dict[str, ast.Module]) -> set[str]:
    """Every private name `app/` defines: its functions, classes and variables, the
    attributes it sets on `self` or `cls`, its `__slots__`."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                names.update(
                    c.value
                    for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
    return {name for name in names if _private(name)}


def reaches(app: Path) -> list[tuple[str, int, str]]:
    """(file, line, what) for every reach into a dependency's internals under `app`."""
    trees = {str(p.relative_to(app)): ast.parse(p.read_text()) for p in sorted(app.rglob("*.py"))}
    own = _own_private_names(trees)
    found: list[tuple[str, int, str]] = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            what: str | None = None
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                module = node.module
                if module.split(".")[0] not in ("app", "__future__"):
                    dotted = [module, *(f"{module}.{a.name}" for a in node.names)]
                    if any(_private(part) for d in dotted for part in d.split(".")) or any(
                        d == m or d.startswith(f"{m}.") for d in dotted for m in INTERNAL_MODULES
                    ):
                        what = f"from {module} import {', '.join(a.name for a in node.names)}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] != "app" and (
                        any(map(_private, parts))
                        or any(alias.name.startswith(m) for m in INTERNAL_MODULES)
                    ):
                        what = f"import {alias.name}"
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                if node.attr not in NAMEDTUPLE_API and not (mine and node.attr in own):
                    what = ast.unparse(node)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and node.args[1].value not in own
            ):
                what = ast.unparse(node)
            if what is not None and not any(
                file == name and private in what for file, private in ALLOWED
            ):
                found.append((name, getattr(node, "lineno", 0), what))
    return sorted(found)


def test_no_code_reaches_into_a_dependencys_internals() -> None:
    assert reaches(APP) == []


def test_each_kind_of_reach_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from sqlalchemy.util.concurrency import await_only\n"
        "from asyncpg.pgproto import pgproto\n"
        "from fastapi._compat import ModelField\n"
        "import uvicorn.protocols.http.httptools_impl\n"
        "from fastapi.routing import APIRoute\n"
        "class Route(APIRoute):\n"
        "    def handler(self):\n"
        "        self._mine = 1\n"
        "        return self._embed_body_fields, self._mine\n"
        "import logging\n"
        "logging._srcfile = None\n"
        "getattr(logging, '_lock')\n"
        "Row._make(())\n"
    )
    assert [line for _, line, _ in reaches(tmp_path)] == [1, 2, 3, 4, 9, 11, 12]
