"""``run``: execute notebooks in place in a fresh kernel and store their outputs.

Needs ``nbformat`` and ``nbclient``, imported lazily.
"""

from __future__ import annotations

from pathlib import Path

from .transform import _dumps


def _first_line(cell) -> str:
    lines = [ln for ln in cell.source.splitlines() if ln.strip()]
    text = lines[0].strip() if lines else ""
    return text if len(text) <= 60 else text[:57] + "..."


def _execute(path: Path, timeout: int) -> str | None:
    """Execute one notebook in place; None when every cell ran, else what went wrong and where."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # a missing or unreadable file is reported like any other failure
        return f"cannot read it: {type(exc).__name__}: {exc}"
    at: dict = {}

    def where() -> str:
        if "index" not in at:
            return "before the first cell"
        k = at["index"]
        return f"cell {k + 1} of {len(nb.cells)} (`{_first_line(nb.cells[k])}`)"

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_start=lambda cell, cell_index: at.update(index=cell_index))
    try:
        client.execute()
    except CellExecutionError as exc:
        return f"{where()} raised {exc.ename}: {exc.evalue}"
    except Exception as exc:  # a dead kernel (exit()), a timeout, a kernel that would not start
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{where()}: {type(exc).__name__}: {first}"
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
    path.write_text(_dumps(nb))
    return None


def run(paths: list[Path], timeout: int = 600) -> list[str]:
    """Execute notebooks in place (fresh kernel, cwd = the notebook's folder), storing outputs.

    Every notebook is run, whatever happened to the ones before it, and reported on one line:
    ``ok`` or ``error`` with the cell and the exception. A notebook that fails is left as it was.
    Returns one message per failed notebook (empty when all ran).
    """
    import time

    failures = []
    for path in map(Path, paths):
        start = time.monotonic()
        error = _execute(path, timeout)
        if error:
            failures.append(f"{path}: {error}")
            print(f"error  {path}: {error}", flush=True)
        else:
            print(f"ok     {path} ({time.monotonic() - start:.0f} s)", flush=True)
    if failures:
        print(f"{len(failures)} of {len(paths)} notebooks failed", flush=True)
    return failures
