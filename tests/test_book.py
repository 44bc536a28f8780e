"""The book's sources, checked cheaply before the build (the build and its pages are checked by
`make book` and `make site-test`: tests/browser/)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bibliography_parses_with_unique_keys():
    """A broken entry stops the whole book build; catch it here, in a second, with its line."""
    pybtex = pytest.importorskip("pybtex.database")
    text = (ROOT / "book" / "references.bib").read_text()
    keys = re.findall(r"(?m)^@\w+\{([^,]+),", text)
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert len(pybtex.parse_string(text, "bibtex").entries) == len(keys)


def test_glossary_terms_are_unique_and_separated():
    """Each term of the glossary directive starts after an empty line (Sphinx warns otherwise,
    and the book builds with -W) and appears once (merges have glued and doubled entries)."""
    text = (ROOT / "book" / "glossary.md").read_text()
    body = text.split("```{glossary}\n", 1)[1].rsplit("```", 1)[0]
    lines = body.split("\n")
    terms = [ln for ln in lines if ln and not ln.startswith(" ")]
    glued = [ln for prev, ln in zip(lines, lines[1:])
             if ln and not ln.startswith(" ") and prev.strip()]
    assert not glued, f"glossary terms not preceded by an empty line: {glued}"
    assert len(terms) == len(set(terms)), sorted(t for t in terms if terms.count(t) > 1)
