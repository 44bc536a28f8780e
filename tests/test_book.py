"""The real Jupyter Book build: every notebook executed, warnings are errors."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    # BOOK_OUTPUT_DIR: build where `make book` would (.ci/run sets it to the repository, so the
    # browser test afterwards reuses this build instead of building the book a second time).
    out = Path(os.environ["BOOK_OUTPUT_DIR"]) if os.environ.get("BOOK_OUTPUT_DIR") else \
        tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(ROOT), "--toc", str(ROOT / "book" / "_toc.yml"),
                           "--path-output", str(out), "-W", "--keep-going"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    return out / "_build" / "html"


def test_every_toc_page_is_built(html):
    for rel in ("index.html", "book/intro.html", "book/notation.html", "book/glossary.html",
                "book/how_to_use.html", "book/bibliography.html"):
        assert (html / rel).exists(), rel
    for d in ("chapters", "exercises", "solutions"):
        for nb in (ROOT / d).glob("*.ipynb"):
            assert (html / d / (nb.stem + ".html")).exists(), f"{d}/{nb.stem}"


def test_chapter_one_shows_figures_without_a_kernel(html):
    page = (html / "chapters" / "01_rooflines.html").read_text()
    images = re.findall(r"<img[^>]+src=\"([^\"]+\.png)\"", page)
    assert len(images) >= 4, images
    for src in images:
        assert (html / "chapters" / src).resolve().exists(), src


def test_widgets_and_math_load_from_the_site_not_a_cdn(html):
    page = (html / "chapters" / "01_rooflines.html").read_text()
    assert "application/vnd.jupyter.widget-state+json" in page
    scripts = re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", page)
    assert any(s.startswith("../_static/ipywidgets/embed.js") for s in scripts), scripts
    assert any(s.startswith("../_static/mathjax/tex-mml-chtml.js") for s in scripts), scripts
    assert (html / "_static" / "ipywidgets" / "embed.js").exists()
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    remote = [s for s in scripts if s.startswith(("http:", "https:", "//"))]
    assert remote == [], f"scripts loaded from elsewhere: {remote}"


def test_colab_launch_button_on_notebook_pages(html):
    page = (html / "chapters" / "01_rooflines.html").read_text()
    assert "colab.research.google.com/github/" in page
    sol = (html / "solutions" / "01_rooflines.html").read_text()
    assert "colab.research.google.com/github/" in sol


def test_solutions_are_collapsible(html):
    sol = (html / "solutions" / "01_rooflines.html").read_text()
    assert "tag_hide-input" in sol and "dropdown" in sol


def test_bibliography_parses_with_unique_keys():
    """A broken entry stops the whole book build; catch it here, in a second, with its line."""
    pybtex = pytest.importorskip("pybtex.database")
    text = (ROOT / "book" / "references.bib").read_text()
    keys = re.findall(r"(?m)^@\w+\{([^,]+),", text)
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert len(pybtex.parse_string(text, "bibtex").entries) == len(keys)
