"""The built book, opened page by page in headless Chromium as a reader sees it.

Run with `make browser-test` (builds the book first if `_build/html` is missing). Not part of
`make test`: pyproject's `norecursedirs` keeps this folder out of the default collection, because
it needs a built book, Playwright (requirements.txt) and Debian's Chromium (`apt-get install
chromium`; never `playwright install`, which downloads a browser). Environment:
  SITE_HTML   the built site (default: _build/html)
  SCREENSHOTS where each page's screenshot goes (default: _build/screenshots)
  CHROMIUM    the browser binary (default: /usr/bin/chromium)

Every page: no JavaScript error (console errors or uncaught exceptions), every <img> loaded, math
typeset by MathJax 3, no request to any host but the loopback server (there is no documented
exception on the book's pages: MathJax, the widget bundle and its fonts are served by the site;
the live site, lite/, may fetch only Pyodide's distribution), widget controls
rendered where the page has widgets (and a widget label with math typesets through the MathJax 2
shim), every image has alt text (except figures drawn by a widget from its saved state), headings never skip a level, figures on a white background in
the dark theme. A full-page screenshot of each page is kept as a build artefact.
"""

import functools
import html.parser
import http.server
import io
import os
import re
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html"))
SHOTS = Path(os.environ.get("SCREENSHOTS", ROOT / "_build" / "screenshots"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)",
                allow_module_level=True)
if not SITE.joinpath("index.html").exists():
    pytest.skip(f"no built book at {SITE}: run `make book` (or `make browser-test`)",
                allow_module_level=True)
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (Debian)",
                allow_module_level=True)

# The book's pages; the live site (lite/, JupyterLite's app) has its own tests below.
PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not p.relative_to(SITE).parts[0].startswith("_")
               and p.relative_to(SITE).parts[0] != "lite")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: a free port
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser_context():
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, \
            playwright_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            # tall enough that a tall diagram (the four sharded-matmul cases, 867 px) is shot
            # whole, not cut at the window's edge under the sticky header
            viewport={"width": 1280, "height": 1400})
        yield ctx
        ctx.close()


# Waits for MathJax 3's startup (initial typeset) and any typesetting queued after it.
_WAIT_MATHJAX = """async () => {
  for (let i = 0; i < 100 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 100));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
}"""

# Every image: force eager loading, then wait until it has loaded or failed.
_IMAGES = """async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => { img.loading = 'eager';
    return img.complete ? null : new Promise(r => { img.onload = img.onerror = r;
      setTimeout(r, 10000); }); }));
  return imgs.map(img => ({src: (img.getAttribute('src') || '').slice(0, 80),
                           alt: img.getAttribute('alt'), ok: img.complete && img.naturalWidth > 0,
                           inWidget: img.closest('.jupyter-widgets') !== null}));
}"""

# What ipywidgets' embed bundle does for a label (MathJax 2 API), answered by our shim.
_WIDGET_LABEL_MATH = """async () => {
  const label = document.createElement('label');
  label.className = 'widget-label browser-test-probe';
  document.querySelector('.jupyter-widgets').appendChild(label);
  label.textContent = 'bandwidth $\\\\beta$ in bytes/s';
  if (window.MathJax !== undefined) MathJax.Hub.Queue(['Typeset', MathJax.Hub, label]);
  for (let i = 0; i < 50 && !label.querySelector('mjx-container'); i++)
    await new Promise(r => setTimeout(r, 100));
  const ok = label.querySelector('mjx-container') !== null;
  label.remove();
  return ok;
}"""

_HEADINGS = """() => Array.from(document.querySelectorAll(
    'main article h1, main article h2, main article h3, main article h4, main article h5, main article h6'))
  .map(h => ({level: Number(h.tagName[1]), text: h.textContent.trim().slice(0, 60)}))"""

_DARK_IMAGES = """() => {
  document.documentElement.dataset.theme = 'dark';
  document.documentElement.dataset.mode = 'dark';
  return Array.from(document.querySelectorAll('.bd-content img')).map(img => {
    const s = getComputedStyle(img);
    return {src: img.getAttribute('src'), background: s.backgroundColor, filter: s.filter};
  });
}"""


MAX_FIGURES_COMPARED = 12  # per page, to bound the time


def _shot(locator):
    """A screenshot of one element as a PIL image (None for an element with no size)."""
    from PIL import Image
    box = locator.bounding_box()
    if not box or box["width"] < 8 or box["height"] < 8:
        return None
    return Image.open(io.BytesIO(locator.screenshot(animations="disabled"))).convert("RGB")


def _max_difference(light, dark, margin=4):
    """The largest channel difference between two renderings of one figure, centres aligned (the
    dark theme pads images, on the figure's white background), inside a margin (the theme rounds
    the corners, and the page shows through them)."""
    from PIL import ImageChops
    w, h = min(light.width, dark.width), min(light.height, dark.height)
    if w <= 2 * margin or h <= 2 * margin or abs(light.width - dark.width) > 40:
        return 255

    def centre(im):
        x, y = (im.width - w) // 2, (im.height - h) // 2
        return im.crop((x + margin, y + margin, x + w - margin, y + h - margin))

    return max(hi for _, hi in ImageChops.difference(centre(light), centre(dark)).getextrema())


def _rescaled_difference(light, dark, margin=6):
    """Mean channel difference of the two renderings' drawn content (white borders trimmed, the
    dark one resized onto the light one): near zero when the theme only rescaled the figure by a
    few pixels, large when it dimmed, inverted or recoloured it."""
    from PIL import Image, ImageChops, ImageStat

    def content(im):  # inside the rounded corners, then the drawn part's bounding box
        im = im.crop((margin, margin, im.width - margin, im.height - margin))
        box = ImageChops.difference(im, Image.new("RGB", im.size, (255, 255, 255))).getbbox()
        return im.crop(box) if box else im

    a, b = content(light), content(dark)
    if abs(a.width - b.width) > 0.1 * a.width or abs(a.height - b.height) > 0.1 * a.height:
        return 255.0
    b = b.resize(a.size, Image.LANCZOS)
    return max(ImageStat.Stat(ImageChops.difference(a, b)).mean)


def _luminance(css_rgb):
    r, g, b = (int(v) / 255 for v in re.findall(r"[\d.]+", css_rgb)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _is_loopback(url, base):
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or url.startswith(base)


@pytest.mark.parametrize("rel", PAGES)
def test_page(rel, server, browser_context):
    page = browser_context.new_page()
    errors, outside = [], []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text} ({m.location.get('url')})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))

    def route(r):  # nothing leaves the machine: record and refuse any request off the server
        if _is_loopback(r.request.url, server):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    try:
        page.goto(f"{server}/{rel}", wait_until="load")
        page.wait_for_load_state("networkidle")
        page.evaluate(_WAIT_MATHJAX)
        html = page.content()
        images = page.evaluate(_IMAGES)

        # Widgets: pages that embed widget views render their controls.
        n_views = html.count("application/vnd.jupyter.widget-view+json")
        if n_views:
            # A control: a text box, dropdown, button, checkbox or a slider's handle.
            page.wait_for_selector(".jupyter-widgets :is(input, select, button, textarea, "
                                   ".noUi-handle)", timeout=15000)
            assert page.locator(".jupyter-widgets").count() >= 1
            assert page.evaluate(_WIDGET_LABEL_MATH), "a widget label's math was not typeset"
            page.evaluate(_WAIT_MATHJAX)

        # Math: every math element Sphinx/MyST emitted is typeset, with no MathJax error.
        n_math = page.locator("main .math").count()
        if n_math:
            typeset = page.locator("main .math mjx-container").count()
            assert typeset >= n_math, f"{typeset} of {n_math} math elements typeset"
        assert page.locator("mjx-merror").count() == 0, "MathJax reported a TeX error"

        assert not [i for i in images if not i["ok"]], [i["src"] for i in images if not i["ok"]]
        # Figures a widget draws from its saved state (a data: URL in an Output widget) cannot
        # carry alt text from the notebook; every other image must.
        no_alt = [i["src"] for i in images if not (i["alt"] or "").strip() and not i["inWidget"]]
        assert not no_alt, f"images without alt text: {no_alt}"

        headings = page.evaluate(_HEADINGS)
        if headings:
            assert headings[0]["level"] == 1, headings[:3]
        for prev, cur in zip(headings, headings[1:]):
            assert cur["level"] <= prev["level"] + 1, f"heading level skipped: {prev} -> {cur}"

        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / (rel.replace("/", "__")[:-5] + ".png")), full_page=True)

        # Dark theme. The figures' colours were chosen for a white page (matplotlib's defaults), so
        # the check is that the dark theme shows each figure exactly as the light theme does: the
        # same pixels, on its own white background, not dimmed, while the page around it is dark.
        # (A widget's own figure is exempt: the theme pads the widget area in the dark theme,
        # which rescales it; its white background and lack of filter are checked below.)
        figures = page.locator("article .cell_output img:not(.jupyter-widgets *), "
                               "article figure img:not(.jupyter-widgets *)")
        n_fig = min(figures.count(), MAX_FIGURES_COMPARED)
        light = [_shot(figures.nth(k)) for k in range(n_fig)]
        for img in page.evaluate(_DARK_IMAGES):
            assert img["background"] == "rgb(255, 255, 255)", img
            assert img["filter"] == "none", img
        page.wait_for_timeout(400)  # the theme's colour transitions
        assert _luminance(page.evaluate(
            "getComputedStyle(document.body).backgroundColor")) < 0.2, "dark theme not applied"
        for k in range(n_fig):
            dark = _shot(figures.nth(k))
            if light[k] is not None and dark is not None:
                diff = _max_difference(light[k], dark)
                if diff > 8:  # rescaled by a few pixels? then the drawn content must still match
                    mean = _rescaled_difference(light[k], dark)
                    assert mean <= 6, (f"figure {k} looks different in the dark theme (max diff "
                                       f"{diff}, mean difference of the rescaled content {mean:.1f})")
        if n_fig:
            page.screenshot(path=str(SHOTS / (rel.replace("/", "__")[:-5] + "__dark.png")))

        assert not outside, f"requests off the loopback server: {outside}"
        assert not errors, "\n".join(errors)
    finally:
        page.close()


class _Images(html.parser.HTMLParser):
    """The ``<img>`` tags of a page as written by Sphinx (widget state in ``<script>`` is data)."""

    def __init__(self):
        super().__init__()
        self.images = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


# MyST-NB names a notebook's image outputs by their content's sha256.
_NOTEBOOK_FIGURE = re.compile(r"_images/[0-9a-f]{64}\.(png|jpe?g|svg)$")


def test_figures_have_descriptive_alt_text():
    """MyST-NB's default alt text is the image's path: every figure says what it shows instead
    (cell metadata ``mystnb.image.alt``, checked in the notebooks by tests/test_notebooks.py)."""
    bad, n_figures = [], 0
    for rel in PAGES:
        parser = _Images()
        parser.feed((SITE / rel).read_text())
        for img in parser.images:
            src, alt = img.get("src", ""), (img.get("alt") or "").strip()
            name = src.rsplit("/", 1)[-1]
            if not alt or alt in (src, name) or re.search(r"\.(png|jpe?g|svg|gif)$", alt, re.I):
                bad.append(f"{rel}: {src} (alt {alt!r})")
            elif _NOTEBOOK_FIGURE.search(src):
                n_figures += 1
                if len(alt.split()) < 8:
                    bad.append(f"{rel}: {src} (alt too short to describe a figure: {alt!r})")
    assert n_figures, "no notebook figures found in the built book"
    assert not bad, f"{len(bad)} images without a descriptive alt text, e.g. {bad[:3]}"


# --- The live site (lite/, built by tools/build_lite.py) -----------------------------------------
LITE = SITE / "lite"
PYODIDE_HOST = "cdn.jsdelivr.net"  # the one documented outside host: Pyodide's distribution
_LIVE_NOTEBOOK = "chapters/01_rooflines.ipynb"


def _lite_page(browser_context, server, pyodide):
    """A page whose requests off the server are refused, except Pyodide's distribution, which
    ``pyodide`` answers: "offline" refuses it too; "stub" answers with a module whose
    loadPyodide fails (the real runtime is not downloaded in a test)."""
    page = browser_context.new_page()
    log = {"errors": [], "outside": [], "pyodide": []}
    page.on("console", lambda m: log["errors"].append(f"console.{m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: log["errors"].append(f"uncaught: {e}"))

    def route(r):
        url = r.request.url
        if _is_loopback(url, server):
            return r.continue_()
        if urlsplit(url).hostname == PYODIDE_HOST:
            log["pyodide"].append(url)
            if pyodide == "stub":
                return r.fulfill(status=200, content_type="text/javascript", body=(
                    "export async function loadPyodide() { throw new Error('no Pyodide in tests'); }"))
        else:
            log["outside"].append(url)
        r.abort()

    page.route("**/*", route)
    return page, log


def test_live_launch_page_reports_an_unreachable_kernel(server, browser_context):
    """Offline (Pyodide's distribution refused), the launch page says the live kernel is not
    available, why, and what to do instead, and throws nothing."""
    if not (LITE / "launch.html").exists():
        pytest.skip("no live site (lite/) in this build")
    page, log = _lite_page(browser_context, server, "offline")
    try:
        page.goto(f"{server}/lite/launch.html?path={_LIVE_NOTEBOOK}", wait_until="load")
        page.wait_for_selector("#failed:not([hidden])", timeout=20000)
        text = page.inner_text("body")
        assert "The live kernel is not available" in text and PYODIDE_HOST in text
        assert page.locator("#colab").get_attribute("href").endswith("/blob/main/" + _LIVE_NOTEBOOK)
        assert page.locator("#download").get_attribute("href") == "files/" + _LIVE_NOTEBOOK
        assert LITE.joinpath("files", _LIVE_NOTEBOOK).exists()
        assert page.url.endswith("launch.html?path=" + _LIVE_NOTEBOOK), "must not go on to the app"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "lite__launch_offline.png"), full_page=True)
        assert log["pyodide"], "the launch page should have tried Pyodide's distribution"
        assert not log["outside"], log["outside"]
        # The refused probe is logged by Chromium as a failed resource; nothing else may be.
        other = [e for e in log["errors"] if "Failed to load resource" not in e]
        assert not other, other
    finally:
        page.close()


def test_live_notebook_opens_in_jupyterlite(server, browser_context):
    """With Pyodide's distribution answering (a stub here), the launch page opens JupyterLite's
    notebook app on the page's notebook, whose cells render from the site's own files."""
    if not (LITE / "launch.html").exists():
        pytest.skip("no live site (lite/) in this build")
    page, log = _lite_page(browser_context, server, "stub")
    try:
        page.goto(f"{server}/lite/launch.html?path={_LIVE_NOTEBOOK}", wait_until="load")
        page.wait_for_url("**/lite/notebooks/**", timeout=30000)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length > 5",
                               timeout=30000)
        # the title is a Markdown cell, rendered after the code cells on a busy machine
        page.wait_for_function(
            "document.querySelector('.jp-Notebook').innerText.includes('Chapter 1')",
            timeout=60000)
        assert "Chapter 1" in page.inner_text(".jp-Notebook")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "lite__notebook.png"))
        assert not log["outside"], f"the live site fetched from elsewhere: {log['outside']}"
    finally:
        page.close()
