"""What `make docs` checks in the site it has just built (after `mkdocs build --strict`,
which fails on a broken link or anchor): the API reference shows every path of the
committed spec, and Getting started holds the README's walkthrough.

    python -m tests.docs_site [SITE]      (default: site/)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "openapi" / "openapi.json"
WALKTHROUGH_CURLS = 10  # Getting started includes the README's walkthrough: more curls


def problems(site: Path) -> list[str]:
    """What is wrong with the built site; empty when nothing is."""
    html = (site / "api" / "reference" / "index.html").read_text()
    reference = re.sub(r"<[^>]+>", "", html)  # path parameters are wrapped in spans
    found = [
        f"{path} is missing from the rendered API reference"
        for path in json.loads(SPEC.read_text())["paths"]
        if path not in reference
    ]
    curls = (site / "getting-started" / "index.html").read_text().count("curl")
    if curls <= WALKTHROUGH_CURLS:
        found.append(f"Getting started shows {curls} curls: is the README's walkthrough in?")
    return found


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else REPO / "site"
    found = problems(site)
    for problem in found:
        print(f"{site}: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
