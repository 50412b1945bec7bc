"""Pointers to the README from the docs, the clients' READMEs and docker-compose.yml's
comments lead somewhere: a link `README.md#anchor` names one of the README's headings, a
pointer in words ("Writing a worker" in jobq's README, `README: Security`) names a
heading too, and a docs page a comment names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [*(REPO / "docs").rglob("*.md"), *(REPO / "clients").glob("*/README.md")]
SOURCES = [*sorted(PAGES, key=str), REPO / "docker-compose.yml"]

_LINK = re.compile(r"README\.md#([^)\s>\"']+)")
_IN_WORDS = re.compile(r"\"([^\"\n]+)\" in (?:jobq's |the )?README|README: ([^)\n]+?)[).]")
_PAGE = re.compile(r"\bdocs/[\w/.-]+\.md\b")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (the docs' site uses the same, mkdocs.yml)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings() -> set[str]:
    """The README's headings, as written (fenced code's comments are not headings)."""
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.S)
    return {line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def pointers(text: str) -> list[tuple[str, str]]:
    """(kind, target) of each pointer to the README or to a docs page in `text`."""
    found = [("anchor", anchor) for anchor in _LINK.findall(text)]
    found += [("heading", quoted or named) for quoted, named in _IN_WORDS.findall(text)]
    return found


def test_the_pointers_are_found() -> None:
    """The patterns catch what they are for (the check below can fail)."""
    text = (
        'See "Writing a worker" in jobq\'s README; [x](../README.md#security)\n'
        "# create keys (README: Security).\n"
    )
    assert pointers(text) == [
        ("anchor", "security"),
        ("heading", "Writing a worker"),
        ("heading", "Security"),
    ]
    assert "security" not in {slug(h) for h in headings()}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_pointer_to_the_readme_names_a_heading_it_has(source: Path) -> None:
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".yml":  # its comments
        text = "\n".join(line.partition("#")[2] for line in text.splitlines())
        missing = [page for page in _PAGE.findall(text) if not (REPO / page).is_file()]
        assert not missing, f"{source.name} names docs pages that do not exist: {missing}"
    titles = headings()
    anchors = {slug(title) for title in titles}
    dead = [
        target
        for kind, target in pointers(text)
        if (target not in anchors if kind == "anchor" else target not in titles)
    ]
    assert not dead, f"{source.relative_to(REPO)} points at README sections it lacks: {dead}"
