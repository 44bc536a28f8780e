"""tools/setup_cells.py: the one set-up cell, written into notebooks whatever they start with."""

import ast
import copy
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("setup_cells", ROOT / "tools" / "setup_cells.py")
setup_cells = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_cells)

OLD = ('# Set-up (hidden in the book). On Colab ...\nimport importlib.util\n'
       'if importlib.util.find_spec("scaling_lib") is None:\n    pass  # git+https://example.org/x')


def _code(src, tags=(), **kw):
    return {"cell_type": "code", "execution_count": 3, "id": kw.get("id", "c"),
            "metadata": {"tags": list(tags)}, "outputs": kw.get("outputs", []), "source": src}


def _nb(*cells):
    return {"cells": [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": "# T"},
                      *cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _check(nb, want):
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == want
    assert code[0]["metadata"]["tags"] == ["remove-cell"] and code[0]["outputs"] == []
    assert sum(setup_cells.is_setup_cell(c) for c in nb["cells"]) == 1
    again = copy.deepcopy(nb)
    assert not setup_cells.update(again, want) and again == nb   # idempotent


def test_an_old_copied_cell_is_replaced_in_place():
    want = setup_cells.cell_source()
    nb = _nb(_code(OLD, ["remove-cell"], id="keep", outputs=[{"output_type": "stream"}]),
             _code("import numpy as np", ["hide-input"]))
    assert setup_cells.update(nb, want)
    _check(nb, want)
    assert nb["cells"][1]["id"] == "keep" and nb["cells"][1]["execution_count"] == 3
    assert nb["cells"][2]["source"] == "import numpy as np"


def test_a_missing_cell_is_inserted_and_duplicates_go():
    want = setup_cells.cell_source()
    nb = _nb(_code("x = 1", id="setup"))
    assert setup_cells.update(nb, want)
    _check(nb, want)
    assert nb["cells"][1]["id"] == "setup1"      # unique among the notebook's ids
    nb = _nb(_code(OLD, ["remove-cell"], id="a"), _code("x = 1"), _code(OLD, ["remove-cell"], id="b"))
    assert setup_cells.update(nb, want)
    _check(nb, want)
    assert [c["id"] for c in nb["cells"]] == ["t", "a", "c"]


def test_the_cell_carries_the_configured_url_and_the_pinned_jax():
    src = setup_cells.cell_source()
    assert f'REPOSITORY = "{setup_cells.repository_url()}"' in src
    assert f'JAX = "{setup_cells.pinned_version("jax")}"' in src
    assert "@" + "REPOSITORY@" not in src and "@JAX_VERSION@" not in src
    compile(src, "setup", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # valid in IPython
