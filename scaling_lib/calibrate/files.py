"""Calibrations as JSON files: what ``scaling-lib calibrate --out`` writes and
``--calibration`` reads.

See: :mod:`scaling_lib.calibrate`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..parallelism.estimate import Calibration
from ..units import _brief
from .fit import FitReport

# ---- files --------------------------------------------------------------------------------------
def calibration_dict(cal: Calibration) -> dict:
    """Every constant of a Calibration by name."""
    return {f.name: float(getattr(cal, f.name)) for f in dataclasses.fields(cal)}


def save_calibration(cal: Calibration, path, *, report: FitReport | None = None,
                     source: str | None = None) -> Path:
    """Write ``cal`` (and the fit's summary) as JSON; :func:`load_calibration` reads it."""
    if not isinstance(cal, Calibration):
        raise ValueError(f"cal={_brief(cal)} must be a Calibration")
    rec = {"calibration": calibration_dict(cal)}
    if source is not None:
        rec["source"] = str(source)
    if report is not None:
        rec["fit"] = report.to_dict()
    path = Path(path)
    path.write_text(json.dumps(rec, indent=2) + "\n")
    return path


def load_calibration(path) -> Calibration:
    """The Calibration of a JSON file written by :func:`save_calibration` (or a JSON object of
    constants by name; constants not given keep the library's defaults)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"calibration file {str(path)!r} does not exist; write one with "
                         "`scaling-lib calibrate MEASUREMENTS.csv --out CAL.json`")
    try:
        rec = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"calibration file {str(path)!r} is not JSON ({e.args[0]}); write one "
                         "with `scaling-lib calibrate`") from None
    consts = rec.get("calibration", rec) if isinstance(rec, dict) else None
    if not isinstance(consts, dict):
        raise ValueError(f"calibration file {str(path)!r} must hold a JSON object of constants")
    valid = [f.name for f in dataclasses.fields(Calibration)]
    unknown = sorted(set(consts) - set(valid))
    if unknown:
        raise ValueError(f"calibration file {str(path)!r}: unknown constant(s) "
                         f"{', '.join(unknown)}; valid: {', '.join(valid)}")
    bad = [k for k, v in consts.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise ValueError(f"calibration file {str(path)!r}: {bad[0]}={consts[bad[0]]!r} must be "
                         "a number")
    return Calibration(**consts)
