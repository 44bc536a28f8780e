"""The built book's pages, read as files: every page there, figures without a kernel, nothing
from a CDN, Colab buttons, collapsible solutions.

Run by `make site-test` after `make book` (CI does both; the build itself runs with warnings as
errors, so a broken notebook or reference fails `make book`). Not part of `make test`, which
would otherwise execute every notebook a second time. SITE_HTML overrides where the site is
(default: _build/html).
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html"))
if not SITE.joinpath("index.html").exists():
    pytest.skip(f"no built book at {SITE}: run `make book` (or `make site-test`)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def html():
    return SITE


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
