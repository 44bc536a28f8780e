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
