"""The docs site builds with no broken link or anchor, renders the API reference from the
committed spec, and every link the README gives leads somewhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"


@pytest.mark.once("server")
def test_the_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    html = (site / "api" / "reference" / "index.html").read_text()
    reference = re.sub(r"<[^>]+>", "", html)  # path parameters are wrapped in spans
    spec = json.loads((REPO / "openapi" / "openapi.json").read_text())
    for path in spec["paths"]:
        assert path in reference, f"{path} is missing from the rendered API reference"
    assert (site / "getting-started" / "index.html").read_text().count("curl") > 10


def test_the_readmes_links_lead_to_files() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    assert "docs/security.md" in targets
    for target in targets:
        assert (REPO / target).exists(), target
