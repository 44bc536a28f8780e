"""CONTRIBUTING.md's "where each quantity lives" tables name real homes: every dotted name in
backticks that starts with a library module resolves to a module, function or constant."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("parallelism", "transformer", "sharding", "profile", "validation", "reliability",
           "scheduling", "inference", "serving", "memory", "collectives", "hardware", "plan",
           "planner", "calibrate", "roofline", "simulate")


def _resolve(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("scaling_lib." + ".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def test_every_home_named_in_contributing_exists():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    pattern = r"`((?:%s)\.[A-Za-z_][\w.]*)" % "|".join(MODULES)
    names = sorted(set(re.findall(pattern, text)))
    assert len(names) > 40
    missing = []
    for name in names:
        try:
            _resolve(name.rstrip("."))
        except (ImportError, AttributeError):
            missing.append(name)
    assert missing == [], f"CONTRIBUTING.md names homes that do not exist: {missing}"
