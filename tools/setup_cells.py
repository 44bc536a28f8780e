"""Write the one set-up cell into every notebook of the course (idempotent).

    python tools/setup_cells.py           # rewrite the notebooks whose set-up cell differs
    python tools/setup_cells.py --check   # list them and exit 1 instead (what CI would do)

The cell is tools/setup_cell.tmpl with ``@REPOSITORY@`` replaced by ``repository.url`` from
_config.yml, the setting the Colab and download buttons use too (change the URL there and run
this script), and ``@JAX_VERSION@`` by the jax pin of requirements.txt. A notebook's set-up cell is its first code cell when that cell is tagged
``remove-cell`` and installs the course (any older version of the cell, e.g. one copied from
another chapter); it is replaced in place (id and execution count kept, outputs cleared).
A notebook without one gets the cell inserted before its first code cell. The notebooks' JSON
layout (key order, indentation) is kept, so only the cell's lines change in a diff.
tests/test_notebooks.py checks that every notebook carries exactly this cell.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tools" / "setup_cell.tmpl"
FOLDERS = ("chapters", "solutions", "exercises", "book")
TAG = "remove-cell"
# What marks an existing cell as the set-up cell, old or new.
_MARKERS = re.compile(r"^# Set-up|find_spec\(\"scaling_lib\"\)|git\+https?://", re.M)


def repository_url(root: Path = ROOT) -> str:
    text = (root / "_config.yml").read_text()
    try:
        import yaml
        url = yaml.safe_load(text)["repository"]["url"]
    except ImportError:  # pragma: no cover - PyYAML comes with Jupyter Book
        url = re.search(r"^repository:\s*\n(?:\s+#.*\n)*\s+url:\s*(\S+)", text, re.M).group(1)
    url = str(url).strip().strip("\"'").rstrip("/")
    if not re.fullmatch(r"https?://\S+", url):
        raise ValueError(f"_config.yml repository.url={url!r} must be an http(s) URL of the "
                         f"course repository")
    return url


def pinned_version(name: str, root: Path = ROOT) -> str:
    """``name``'s version in requirements.txt (``name==version``)."""
    m = re.search(rf"^{re.escape(name)}==(\S+)", (root / "requirements.txt").read_text(),
                  re.M | re.I)
    if not m:
        raise ValueError(f"{name} is not pinned (name==version) in requirements.txt")
    return m.group(1)


def cell_source(root: Path = ROOT) -> str:
    """The set-up cell's source: the template with the repository URL from _config.yml and the
    JAX release from requirements.txt (what a runtime without a recent enough JAX gets)."""
    return (root / "tools" / "setup_cell.tmpl").read_text().rstrip("\n").replace(
        "@REPOSITORY@", repository_url(root)).replace("@JAX_VERSION@", pinned_version("jax", root))


def notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for d in FOLDERS for p in (root / d).glob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts)


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def is_setup_cell(cell: dict) -> bool:
    return (cell.get("cell_type") == "code" and TAG in cell.get("metadata", {}).get("tags", [])
            and bool(_MARKERS.search(_text(cell.get("source", "")))))


def update(nb: dict, source: str) -> bool:
    """Put the set-up cell into notebook ``nb`` (a JSON dict); True if anything changed."""
    cells = nb.setdefault("cells", [])
    code = [k for k, c in enumerate(cells) if c.get("cell_type") == "code"]
    setup = [k for k in code if is_setup_cell(cells[k])]
    changed = False
    # Extra set-up cells (a copied cell pasted twice) go; the first one is rewritten.
    for k in reversed(setup[1:]):
        del cells[k]
        changed = True
    if setup and setup[0] == code[0]:
        cell = cells[setup[0]]
    else:
        if setup:  # a set-up cell below other code: move it to the top
            cell = cells.pop(setup[0])
        else:
            ids = {c.get("id") for c in cells}
            cell = {"cell_type": "code", "execution_count": None, "metadata": {"tags": [TAG]},
                    "outputs": [], "source": []}
            if nb.get("nbformat", 4) >= 4 and nb.get("nbformat_minor", 5) >= 5:
                cell["id"] = next(f"setup{i or ''}" for i in range(len(ids) + 1)
                                  if f"setup{i or ''}" not in ids)
        first = next((k for k, c in enumerate(cells) if c.get("cell_type") == "code"), len(cells))
        cells.insert(first, cell)
        changed = True
    want = _lines(source)
    if cell.get("source") != want:
        cell["source"] = want
        changed = True
    if cell.get("outputs"):
        cell["outputs"] = []
        changed = True
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if TAG not in tags:
        tags.append(TAG)
        changed = True
    return changed


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only list notebooks that differ")
    ap.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all of the course)")
    args = ap.parse_args(argv)
    source = cell_source()
    stale = []
    for path in args.paths or notebooks():
        nb = json.loads(path.read_text())
        if update(nb, source):
            stale.append(path)
            if not args.check:
                path.write_text(dumps(nb))
    verb = "differ" if args.check else "updated"
    for path in stale:
        print(f"{verb}: {path}")
    print(f"{len(stale)} notebook(s) {verb}; the set-up cell installs from {repository_url()}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
