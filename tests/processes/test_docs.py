"""Every link the README gives leads somewhere. (The site's strict build and what it
renders are `make docs`'s, a CI step of its own: tests/docs_site.py.)"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_readmes_links_lead_to_files() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    assert "docs/security.md" in targets
    for target in targets:
        assert (REPO / target).exists(), target
