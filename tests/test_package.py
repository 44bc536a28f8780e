import subprocess
import sys


def test_import_is_light_and_never_pulls_jax_or_widgets():
    code = ("import sys, scaling_lib; "
            "bad = [m for m in ('jax', 'ipywidgets', 'matplotlib', 'IPython') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_modules_exposed():
    import scaling_lib

    for name in ("hardware", "roofline", "collectives", "models", "transformer", "memory",
                 "parallelism", "simulate", "units"):
        assert hasattr(scaling_lib, name)
    assert scaling_lib.Breakdown is scaling_lib.breakdown.Breakdown


def test_model_never_imports_the_course_package():
    """The model (scaling_lib proper) never imports scaling_lib.course; only the CLI may."""
    import ast
    from pathlib import Path

    import scaling_lib

    root = Path(scaling_lib.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] == "course" or rel.name.startswith("cli") or rel.name == "__main__.py":
            continue
        pkg = ["scaling_lib", *rel.with_suffix("").parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = pkg[: len(pkg) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            if any(n == "scaling_lib.course" or n.startswith("scaling_lib.course.") for n in names):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, f"the model imports the course package at {offenders}"


def test_the_plan_sits_below_memory():
    """memory imports ParallelPlan from the ground floor (scaling_lib.plan), never the parallelism
    package at module level (which imports memory back through estimate): no import cycle."""
    import ast
    from pathlib import Path

    import scaling_lib

    root = Path(scaling_lib.__file__).parent
    top_level = []
    for path in sorted((root / "memory").glob("*.py")) + [root / "plan.py"]:
        for node in ast.parse(path.read_text()).body:  # module level only; lazy imports are fine
            if isinstance(node, ast.ImportFrom) and node.module and "parallelism" in node.module:
                top_level.append(f"{path.name}:{node.lineno}")
    assert not top_level, f"module-level imports of the parallelism package in memory/plan: {top_level}"
    from scaling_lib.parallelism import ParallelPlan
    from scaling_lib.plan import ParallelPlan as GroundFloor
    assert ParallelPlan is GroundFloor
