"""Build the book's live mode: a JupyterLite site in _build/html/lite (run by `make book`).

    python tools/build_lite.py [--html _build/html]

What goes in (all from this checkout and the package index, nothing else downloaded):
- the course's notebooks (chapters/, exercises/, solutions/, book/), at the same paths as in the
  repository, so the book's "live" button opens ``lite/launch.html?path=chapters/01_x.ipynb``;
- a wheel of scaling_lib built from this checkout, plus the wheels of ipywidgets and its two
  pure-Python companions (versions pinned in requirements.txt), in the site's piplite index: the
  set-up cell installs them from there, never from PyPI (the PyPI fallback is switched off);
- JupyterLite's Notebook interface with the Pyodide kernel (jupyterlite-core and
  jupyterlite-pyodide-kernel, pinned in requirements.txt) and the ipywidgets front end
  (jupyterlab_widgets' lab extension, from the environment).

What does not: the Pyodide runtime (Python compiled to WebAssembly) and its numpy and matplotlib.
No package index carries them, so the reader's browser loads them from Pyodide's own distribution
on jsDelivr (PYODIDE_URL) when a live notebook starts. tools/lite/launch.html says so before
starting, and says cleanly when that distribution cannot be reached; the book's pages keep their
static figures either way.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("chapters", "exercises", "solutions", "book")
# The widget wheels the Pyodide kernel lacks (it ships shims for widgetsnbextension and ipykernel).
EXTRA_WHEELS = ("ipywidgets", "jupyterlab_widgets", "comm")
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
WIDGET_EXTENSION = "@jupyter-widgets/jupyterlab-manager"


def pyodide_url() -> str:
    from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL
    return f"{PYODIDE_CDN_URL}/pyodide.mjs"


def pinned(name: str) -> str:
    norm = name.lower().replace("_", "-")
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m and m.group(1).lower().replace("_", "-") == norm:
            return f"{name}=={m.group(2)}"
    raise ValueError(f"{name} is not pinned in requirements.txt (name==version)")


def repository() -> dict:
    import yaml
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = cfg["repository"]
    return {"url": str(repo["url"]).rstrip("/"), "branch": repo.get("branch", "main"),
            "colab": cfg.get("launch_buttons", {}).get("colab_url",
                                                        "https://colab.research.google.com")}


def widget_extension_dirs() -> list[str]:
    """Where jupyterlab_widgets' lab extension (the ipywidgets front end) is installed, when that
    is not this environment's own folder (which jupyter lite reads anyway: naming it twice would
    copy it twice)."""
    from jupyter_core.paths import jupyter_path
    own = (Path(sys.prefix) / "share" / "jupyter" / "labextensions").resolve()
    if (own / WIDGET_EXTENSION / "package.json").exists():
        return []
    return [d for d in jupyter_path("labextensions")
            if (Path(d) / WIDGET_EXTENSION / "package.json").exists()][:1]


def _fold_setup_cell(text: str) -> str:
    """The notebook with its set-up cell (first code cell, tagged remove-cell) shown folded in
    JupyterLite (``metadata.jupyter.source_hidden``), as the book hides it; it still runs."""
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            if "remove-cell" in cell.get("metadata", {}).get("tags", []):
                cell["metadata"].setdefault("jupyter", {})["source_hidden"] = True
            break
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def run(*cmd, **kw):
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def build(html: Path) -> Path:
    out = html.resolve() / "lite"  # absolute: jupyter lite runs in a temporary folder
    with tempfile.TemporaryDirectory(prefix="lite-") as tmp:
        tmp = Path(tmp)
        wheels, contents, lite_dir = tmp / "pypi", tmp / "contents", tmp / "lite"
        for d in (wheels, contents, lite_dir):
            d.mkdir()
        pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
        # scaling_lib from this checkout (build deps are in the environment: setuptools), built
        # from a copy so that setuptools' build/ and egg-info never land in (or leak from) it
        src = tmp / "src"
        shutil.copytree(ROOT / "scaling_lib", src / "scaling_lib",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, src / name)
        run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, src,
            stdout=subprocess.DEVNULL)
        run(*pip, "download", "--no-deps", "--only-binary=:all:", "-d", wheels,
            *(pinned(n) for n in EXTRA_WHEELS), stdout=subprocess.DEVNULL)
        for d in FOLDERS:
            (contents / d).mkdir()
            for nb in sorted((ROOT / d).glob("*.ipynb")):
                (contents / d / nb.name).write_text(_fold_setup_cell(nb.read_text()))
        (lite_dir / "jupyter-lite.json").write_text(json.dumps({
            "jupyter-lite-schema-version": 0,
            "jupyter-config-data": {
                "appName": "How LLMs scale: live notebooks",
                "litePluginSettings": {KERNEL_PLUGIN: {
                    "pyodideUrl": pyodide_url(), "disablePyPIFallback": True}},
            }}, indent=2))
        if out.exists():
            shutil.rmtree(out)
        run(sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", lite_dir,
            "--contents", contents,
            *(f"--piplite-wheels={w}" for w in sorted(wheels.glob("*.whl"))),
            *(f"--FederatedExtensionAddon.extra_labextensions_path={d}"
              for d in widget_extension_dirs()),
            "--output-dir", out, "--no-sourcemaps", "--no-unused-shared-packages",
            cwd=tmp, stdout=subprocess.DEVNULL)
    config = json.loads((out / "jupyter-lite.json").read_text())["jupyter-config-data"]
    names = {e["name"] for e in config.get("federated_extensions", [])}
    missing = {WIDGET_EXTENSION, KERNEL_PLUGIN.split(":")[0]} - names
    if missing:
        raise SystemExit(f"the live site lacks the lab extension(s) {sorted(missing)}: install "
                         f"requirements.txt (jupyterlab_widgets, jupyterlite-pyodide-kernel)")
    launch = (ROOT / "tools" / "lite" / "launch.html").read_text()
    repo = repository()
    for key, value in {"@PYODIDE_URL@": pyodide_url(), "@REPOSITORY@": repo["url"],
                       "@BRANCH@": repo["branch"], "@COLAB@": repo["colab"].rstrip("/")}.items():
        launch = launch.replace(key, value)
    (out / "launch.html").write_text(launch)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    out = build(args.html)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    wheels = sorted(p.name for p in out.rglob("*.whl"))
    print(f"live site: {out} ({size / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s); "
          f"wheels: {', '.join(wheels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
