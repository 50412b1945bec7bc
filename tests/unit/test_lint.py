"""The code is kept to its rules in CI too: the layering contracts (import-linter), ruff's
checks and format, and mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import exclusive

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.once("server")
@pytest.mark.parametrize(
    "command",
    [
        ["lint-imports", "--no-cache"],
        ["ruff", "check", "app", "tests", "alembic", "bench", "clients/python"],
        ["ruff", "format", "--check", "app", "tests", "alembic", "bench", "clients/python"],
        ["mypy"],
    ],
    ids=["layers", "ruff", "ruff-format", "mypy"],
)
def test_the_code_keeps_its_rules(command: list[str]) -> None:
    with exclusive(REPO):  # their caches in the repository take one writer at a time
        result = subprocess.run(
            [str(BIN / command[0]), *command[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
