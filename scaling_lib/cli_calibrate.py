"""The ``calibrate`` subcommand: fit the estimator's constants to step times you measured.

    calibrate MEASUREMENTS.csv --out CAL.json [--fit C1,C2] [--start CAL.json] [--json]

Reads one row per measured run (the ``estimate`` flags as columns, with underscores, and the
measured ``step_time_s``; :func:`scaling_lib.calibrate.load_measurements`), fits
(:func:`scaling_lib.calibrate.fit_measurements`), prints every row's error before and after and
left out, which constants moved and why, and writes CAL.json for ``estimate``, ``plan`` and
``optimal --calibration CAL.json``.

See: README, "Calibrate to your cluster", and the chapter "Validating the planner".
"""

from __future__ import annotations

import json
import sys
import warnings


def add_calibrate(sub) -> None:
    from .calibrate import FIT_FIELDS

    p = sub.add_parser("calibrate", help="fit the estimator's constants to measured step times",
                       description="Fit the step-time estimator's calibration constants to the "
                       "step times in MEASUREMENTS.csv (one row per measured run: the estimate "
                       "flags as columns, e.g. model, gpu, gpus, tp, pp, micro_batch, "
                       "global_batch, seq_len, and the measured step_time_s).")
    p.add_argument("measurements", metavar="MEASUREMENTS.csv")
    p.add_argument("--out", metavar="CAL.json", required=True,
                   help="where to write the fitted constants (JSON)")
    p.add_argument("--fit", metavar="C1,C2",
                   help="constants to fit (default: chosen from the rows: those they depend "
                   f"on and that predict left-out rows better); any of {', '.join(FIT_FIELDS)}")
    p.add_argument("--start", metavar="CAL.json",
                   help="start from these constants (default: the library's)")
    p.add_argument("--no-cross-validate", dest="cross_validate", action="store_false",
                   help="skip the leave-one-out refits (faster with many rows)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(run=run_calibrate)


def _fields(text):
    from .calibrate import BOUNDS
    from .cli import UsageError

    if text is None:
        return None
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in BOUNDS]
    if bad or not names:
        raise UsageError(f"--fit {text!r}: unknown constant {bad[0] if bad else '(none)'}; "
                         f"choose among: {', '.join(BOUNDS)}")
    return names


def run_calibrate(args) -> int:
    from . import calibrate as cb
    from .cli_train import count, duration, percent, _plan_text, _table

    from pathlib import Path

    from .cli import UsageError

    fields = _fields(args.fit)
    out = Path(args.out)
    if out.suffix.lower() != ".json" or not out.parent.is_dir():
        raise UsageError(f"--out {args.out!r} must name a .json file in an existing folder, "
                         "e.g. cal.json")
    start = cb.load_calibration(args.start) if args.start else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = cb.load_measurements(args.measurements)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    cal, rep = cb.fit_measurements(rows, fields=fields, calibration=start,
                                   cross_validate=args.cross_validate)
    path = cb.save_calibration(cal, args.out, report=rep, source=args.measurements)
    if args.json:
        print(json.dumps({"calibration": cb.calibration_dict(cal), "out": str(path)}
                         | rep.to_dict(), indent=2))
        return 0
    held = rep.folds > 0
    fitted = ", ".join(rep.fitted) if rep.fitted else "nothing"
    print(f"calibrated on {len(rows)} measured run{'s' * (len(rows) != 1)} of "
          f"{args.measurements}: fitted {fitted}")
    head = ["line", "run", "plan", "measured", "start", "error", "fitted", "error"]
    if held:
        head += ["left out", "error"]
    table = [head]
    e0, e1, e2 = rep.errors("start"), rep.errors("fitted"), rep.errors("held_out")
    for i, r in enumerate(rows):
        row = [str(r.line), f"{r.label}, {count(r.cluster.n_devices)} x "
               f"{r.cluster.accelerator.name}", _plan_text(r.plan), duration(r.step_time),
               duration(rep.predicted_start[i]), f"{e0[i]:+.1%}", duration(rep.predicted[i]),
               f"{e1[i]:+.1%}"]
        if held:
            row += [duration(rep.predicted_held_out[i]), f"{e2[i]:+.1%}"]
        table.append(row)
    print(_table(table))
    cv = ("leave-one-out" if rep.folds == len(rows) else f"{rep.folds}-fold cross-validated")
    print(f"MAPE: start {percent(rep.mape('start'))}, fitted {percent(rep.mape())}"
          + (f", {cv} {percent(rep.mape('held_out'))} (each row predicted by a fit that did "
             "not see it)" if held else ""))
    if rep.moved:
        print("moved:")
        for f, a, b, why in rep.moved:
            print(f"  {f} {a:.3g} -> {b:.3g} ({b / a - 1:+.0%}): {why}" if a else
                  f"  {f} {a:.3g} -> {b:.3g}: {why}")
    else:
        print("moved: nothing (the start already describes these runs)")
    if rep.kept:
        print("kept at the start:")
        for f, why in rep.kept.items():
            print(f"  {f} = {getattr(cal, f):.3g}: {why}")
    print(f"wrote {path}")
    return 0
