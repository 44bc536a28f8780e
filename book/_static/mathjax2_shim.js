/* MathJax 2 -> MathJax 3 shim for ipywidgets' embed bundle (book/_static/ipywidgets/embed.js).
 *
 * The bundle (@jupyter-widgets/html-manager 1.0.15) typesets widget labels with the MathJax 2 API:
 *     if (window.MathJax !== undefined) MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]);
 * The book serves MathJax 3, which has no `Hub`; before it loads, window.MathJax is Sphinx's plain
 * configuration object, so every widget label threw "Cannot read properties of undefined (reading
 * 'Queue')" and its math stayed as raw TeX. This script gives every object assigned to
 * window.MathJax (Sphinx's configuration, then MathJax 3's global) a non-enumerable `Hub` whose
 * `Queue` runs MathJax 3's `typesetPromise` on the element, waiting for MathJax 3 to be ready.
 * It must run before Sphinx's configuration script and MathJax (book/_ext/site_fixes.py).
 */
(function () {
  "use strict";
  var current = window.MathJax;
  var pending = [];

  function ready(mj) {
    return mj && mj.startup && mj.startup.promise && typeof mj.typesetPromise === "function";
  }

  function typeset(elements) {
    var mj = current;
    if (!ready(mj)) {
      Array.prototype.push.apply(pending, elements);  // typeset once MathJax 3 has loaded
      return;
    }
    mj.startup.promise = mj.startup.promise
      .then(function () { return mj.typesetPromise(elements); })
      .catch(function (err) { console.warn("MathJax could not typeset a widget label:", err); });
  }

  // Widget labels write math between $...$ (or $$...$$), as in Jupyter; the book's MathJax 3 only
  // knows \(...\) and \[...\] (a "$" in prose must stay a dollar). Plain-text labels, which is
  // what the bundle writes (textContent), are rewritten to those delimiters before typesetting.
  function texDelimiters(el) {
    if (!el || el.nodeType !== 1 || el.children.length) return;
    var text = el.textContent;
    var out = text.replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]").replace(/\$([^$]+)\$/g, "\\($1\\)");
    if (out !== text) el.textContent = out;
  }

  function flush() {
    if (pending.length && ready(current)) {
      var elements = pending;
      pending = [];
      typeset(elements);
    }
  }

  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (typeof job === "function") {
          job();
        } else if (Array.isArray(job) && job[0] === "Typeset") {
          texDelimiters(job[2]);
          typeset([job[2] || document.body]);
        }
      }
    },
  };

  function withHub(obj) {
    if (obj && typeof obj === "object" && !obj.Hub) {
      Object.defineProperty(obj, "Hub", { value: hub, configurable: true, writable: true });
    }
    return obj;
  }

  current = withHub(current);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); flush(); },
  });
  window.addEventListener("load", flush);
  document.addEventListener("DOMContentLoaded", flush);
})();
