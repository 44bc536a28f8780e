"""The "Live" button: each notebook page opens its notebook in the book's JupyterLite site.

`make book` builds that site into _build/html/lite (tools/build_lite.py). This extension adds one
entry to the theme's launch menu (next to Colab) on every page made from a notebook, pointing at
``lite/launch.html?path=<the notebook>``: that page says what the live mode downloads (Pyodide
from its CDN), checks it can, and opens the notebook, or explains cleanly why it cannot.
"""

LAUNCHER = "lite/launch.html"
TOOLTIP = ("Run this notebook in your browser (JupyterLite, no server; Python itself is "
           "downloaded from Pyodide's CDN)")


def _add_live_button(app, pagename, templatename, context, doctree):
    source = app.env.doc2path(pagename, base=False) if pagename in app.env.all_docs else None
    if source is None or not str(source).endswith(".ipynb"):
        return
    url = context["pathto"](LAUNCHER, 1) + "?path=" + str(source).replace("\\", "/")
    button = {"type": "link", "text": "Live (in browser)", "tooltip": TOOLTIP,
              "icon": "fas fa-bolt", "url": url, "label": "live-button"}
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            group["buttons"].insert(0, button)
            return
    context.setdefault("header_buttons", []).append(
        {"type": "group", "tooltip": "Launch interactive content", "icon": "fas fa-rocket",
         "buttons": [button], "label": "launch-buttons"})


def setup(app):
    # After sphinx-book-theme's launch buttons (priority 501), before its rendering of them.
    app.connect("html-page-context", _add_live_button, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
