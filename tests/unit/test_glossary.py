"""ARCHITECTURE.md's glossary: every word it defines is defined once, and the words that once meant two things are there."""

from __future__ import annotations

import re
from pathlib import Path

ARCHITECTURE = Path(__file__).resolve().parents[2] / "ARCHITECTURE.md"
# The words a reader of the code met with two or three meanings: each must have its one meaning written down.
REQUIRED = {"Host", "Session", "Episode pool", "Container pool", "Sandbox", "Runner", "Record", "Event", "Terminal reason", "--out"}


def _glossary() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(r"^## Glossary\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "ARCHITECTURE.md has no Glossary section"
    return match.group(1)


def _defined(glossary: str) -> list[str]:
    terms = []
    for entry in re.findall(r"^- (.*?)(?=^- |\Z)", glossary, re.S | re.M):
        terms += [term.strip("`") for term in re.findall(r"\*\*(.+?)\*\*", entry.split(":")[0])]
    return terms


def test_the_glossary_defines_each_word_that_had_two_meanings_exactly_once():
    terms = _defined(_glossary())
    assert REQUIRED <= set(terms), REQUIRED - set(terms)
    assert len(terms) == len(set(terms)), [t for t in terms if terms.count(t) > 1]


def test_the_glossary_finder_sees_a_missing_and_a_repeated_word():
    assert _defined("- **Host**: a.\n- **Host**: b.\n") == ["Host", "Host"]
    assert "Session" not in _defined("- **Host**: the process; a Session is elsewhere.\n")
