"""Small Sphinx extension for the published book (registered in _config.yml, `local_extensions`).

- Serves `mathjax2_shim.js` (see that file): the ipywidgets embed bundle typesets widget labels
  through MathJax 2's `MathJax.Hub.Queue`, which MathJax 3 (what the book serves) does not have;
  the shim maps those calls onto MathJax 3 so labels with math render and no page throws.
- Serves `site.css`: figures keep a white background (and no dimming filter) in the dark theme.
- Removes duplicate `<script>` entries: under Jupyter Book, sphinx-thebe 0.3.1 (and
  sphinx-togglebutton) register their inline configuration twice, once with filename None and once
  with "", so each page declared `const THEBE_JS_URL` twice and threw "Identifier 'THEBE_JS_URL'
  has already been declared".
- Gives the theme a valid default colour mode ("auto", pydata-sphinx-theme's `default_mode`
  template variable): left empty, the theme logs "Got invalid theme mode" as a console error on a
  reader's first visit.
"""


def _page_context(app, pagename, templatename, context, doctree):
    context.setdefault("default_mode", "auto")
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        filename = str(getattr(js, "filename", js) or "")  # inline scripts have None or ""
        key = (filename, tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


def setup(app):
    # Before Sphinx's MathJax configuration and MathJax itself (priority 500), so every object the
    # page assigns to window.MathJax goes through the shim.
    app.add_js_file("mathjax2_shim.js", priority=100)
    app.add_css_file("site.css")
    # Early (priority 100): html-page-context stops at the first handler that returns a template.
    app.connect("html-page-context", _page_context, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
