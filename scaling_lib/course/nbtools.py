"""Small helpers for notebooks: computed prose and the library's own source shown in a chapter.

Chapters never paste a copy of a library function or type a number the library computes: they
display the real source with :func:`show_source` and write prose with numbers through :func:`md`.
IPython is imported lazily (it is always present in a notebook kernel).
"""

from __future__ import annotations

import inspect
import textwrap


def md(text: str) -> None:
    """Display ``text`` (Markdown, usually an f-string with computed numbers) as rich output.

    Outside IPython it prints the text, so scripts and doctests still work.

    >>> md("**2** FLOPs")
    **2** FLOPs
    """
    text = textwrap.dedent(text).strip()
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with every kernel
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def source_of(obj) -> str:
    """The source code of a library function or class, as text."""
    return textwrap.dedent(inspect.getsource(obj))


def show_source(obj) -> None:
    """Display the source of ``obj`` as a Python code block (the real code, not a copy)."""
    md(f"```python\n{source_of(obj)}```")


def table(rows: list[dict], *, floatfmt: str = ".3g") -> str:
    """A Markdown table from a list of dicts (same keys); numbers formatted with ``floatfmt``.

    >>> print(table([{"chip": "h100", "B*": 295.3}]))
    | chip | B* |
    | --- | --- |
    | h100 | 295 |
    """
    if not rows:
        raise ValueError("table() needs at least one row")
    cols = list(rows[0])

    def cell(v):
        if isinstance(v, float):
            return format(v, floatfmt)
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
