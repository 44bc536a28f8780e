"""The built book's pages, read as files: every page there, figures without a kernel, nothing
from a CDN, Colab buttons, collapsible solutions.

Run by `make site-test` after `make book` (CI does both; the build itself runs with warnings as
errors, so a broken notebook or reference fails `make book`). Not part of `make test`, which
would otherwise execute every notebook a second time. SITE_HTML overrides where the site is
(default: _build/html).
"""

import json
import os
import re
import zipfile
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


def _built_notebook_pages(html):
    for d in ("chapters", "exercises", "solutions", "book"):
        for nb in sorted((ROOT / d).glob("*.ipynb")):
            if (html / d / (nb.stem + ".html")).exists():
                yield d, nb


def test_live_site_has_the_notebooks_the_wheel_and_the_kernel(html):
    """`make book` builds the live site (tools/build_lite.py) into lite/: every notebook, the
    scaling_lib wheel in its package index, the Pyodide kernel and the widgets front end."""
    lite = html / "lite"
    assert (lite / "launch.html").exists() and (lite / "notebooks" / "index.html").exists()
    for d in ("chapters", "exercises", "solutions", "book"):
        for nb in (ROOT / d).glob("*.ipynb"):
            assert (lite / "files" / d / nb.name).exists(), f"lite/files/{d}/{nb.name}"
    wheels = {p.name for p in lite.rglob("*.whl")}
    assert any(w.startswith("scaling_lib-") and w.endswith("-py3-none-any.whl") for w in wheels)
    assert any(w.startswith("ipywidgets-") for w in wheels), wheels
    index = json.loads((lite / "pypi" / "all.json").read_text())
    assert "scaling-lib" in index and "ipywidgets" in index, sorted(index)  # normalised names
    wheel = next(lite.rglob("scaling_lib-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "scaling_lib/course/lite.py" in names and "scaling_lib/roofline.py" in names
    # Pyodide runs Python 3.14: the wheel must not exclude it.
    requires = re.search(r"^Requires-Python: (.*)$", meta, re.M)
    assert requires is None or "<3.14" not in requires.group(1), requires.group(0)
    config = json.loads((lite / "jupyter-lite.json").read_text())["jupyter-config-data"]
    names = {e["name"] for e in config["federated_extensions"]}
    assert {"@jupyterlite/pyodide-kernel-extension", "@jupyter-widgets/jupyterlab-manager"} <= names
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["disablePyPIFallback"] is True          # packages come from the site, not PyPI
    assert kernel["pyodideUrl"].startswith("https://cdn.jsdelivr.net/pyodide/")  # documented
    launch = (lite / "launch.html").read_text()
    assert kernel["pyodideUrl"] in launch and "@PYODIDE_URL@" not in launch


def test_live_button_on_every_notebook_page(html):
    n = 0
    for d, nb in _built_notebook_pages(html):
        page = (html / d / (nb.stem + ".html")).read_text()
        want = f"../lite/launch.html?path={d}/{nb.name}"
        assert want in page, f"{d}/{nb.stem}.html lacks its live button ({want})"
        n += 1
    assert n, "no notebook pages"
    assert "lite/launch.html" not in (html / "book" / "intro.html").read_text()
