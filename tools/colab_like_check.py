"""Run a notebook the way a fresh Colab runtime would, as closely as this machine allows.

    python tools/colab_like_check.py --python ~/.pyenv/versions/3.12.1/bin/python \\
        chapters/09_sharded_matmul.ipynb [chapters/01_rooflines.ipynb ...]

Makes a fresh venv (default /tmp/colab-like) with that Python and COLAB_PACKAGES (the versions a
Colab CPU runtime came with when this was written; edit them to match a newer runtime), then
executes each notebook in that venv's own kernel from an empty folder, its set-up cell
unchanged except REPOSITORY, which points at this checkout's committed HEAD
(``git+file://localhost/...``: GitHub is not reachable from the build machines, and the
published URL needs the repository to be public). Prints what the set-up cell installed, which
devices the multi-device cells used, and OK or the failing cell. Needs the package index.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A Colab CPU runtime's preinstalled versions of what the course uses (Python 3.12).
COLAB_PACKAGES = ["numpy==2.0.2", "matplotlib==3.10.0", "ipywidgets==7.7.1", "jax==0.5.2",
                  "jaxlib==0.5.1", "ipykernel==6.17.1", "ipython==7.34.0", "pip==24.1.2",
                  "nbclient", "nbformat"]

_RUN = r'''
import sys, time, nbformat
from nbclient import NotebookClient
src, repo, cwd = sys.argv[1:4]
nb = nbformat.read(src, as_version=4)
first = next(c for c in nb.cells if c.cell_type == "code")
old = first.source.split('REPOSITORY = "')[1].split('"')[0]
first.source = first.source.replace(old, repo)
t = time.time()
try:
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": cwd}}).execute()
    status = "OK"
except Exception as e:
    status = "FAILED: " + str(e)[-1500:]
print(status, f"({time.time() - t:.0f} s)")
for k, c in enumerate(c for c in nb.cells if c.cell_type == "code"):
    text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("name") == "stdout")
    if k == 0 or "device" in text.lower():
        print(f"  code cell {k}: {text.strip()[:300] or '(no output)'}")
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter (Python 3.12)")
    ap.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "colab-like")
    ap.add_argument("notebooks", nargs="+", type=Path)
    args = ap.parse_args(argv)
    py = args.venv / "bin" / "python"
    if not py.exists():
        subprocess.run([args.python, "-m", "venv", args.venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", *COLAB_PACKAGES], check=True)
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "scaling_lib"], check=False,
                   capture_output=True)
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("PYTHONPATH", "JUPYTER_PATH", "VIRTUAL_ENV")}
    ok = True
    with tempfile.TemporaryDirectory(prefix="colab-like-") as cwd:
        for nb in args.notebooks:
            print(f"{nb}:", flush=True)
            start = time.perf_counter()
            r = subprocess.run([py, "-c", _RUN, str(nb.resolve()),
                                f"file://localhost{ROOT}", cwd], env=env, cwd=cwd,
                               capture_output=True, text=True)
            print(r.stdout.rstrip(), f"[{time.perf_counter() - start:.0f} s]")
            ok &= r.returncode == 0 and r.stdout.startswith("OK")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
