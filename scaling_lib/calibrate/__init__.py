"""Calibrate the step-time estimator to your own cluster: measured step times in, constants out.

The workflow: measure a handful of small runs on your cluster, write one CSV row per run (the
``estimate`` command's flags as columns and the measured ``step_time_s``), fit, then plan the
large run with the fitted constants::

    rows = load_measurements("measured.csv")          # one Measurement per row
    cal, rep = fit_measurements(rows)                 # Calibration, FitReport
    save_calibration(cal, "cal.json", report=rep)     # read back by load_calibration

:func:`fit_measurements` fits the constants of
:class:`~scaling_lib.parallelism.estimate.Calibration` (fractions of peaks, times) that the
rows depend on, within physical bounds (``BOUNDS``, each sourced), by robust least squares on the
log ratio predicted / measured, pulled gently towards the starting constants so that a constant
the rows cannot pin down stays where it was: it fits physics, not rows. The report gives every
row's error before and after, the leave-one-out error (each row predicted by a fit that never saw
it: the honest figure), and which constants moved and why.
:func:`scaling_lib.validation.fit` is this fitter run on the vTrain measurements.

See: the chapter "Validating the planner", section "Calibrating to your own cluster".
"""

from .files import calibration_dict, load_calibration, save_calibration
from .fit import (BOUNDS, FIT_FIELDS, ROBUST_SCALE, FitReport, choose_fields, fit_constants,
                  fit_measurements, sensitivities)
from .measurements import (CLUSTER_COLUMNS, COLUMNS, DTYPES, GPT_VOCAB, MEASURED_COLUMN,
                           MODEL_COLUMNS, PLAN_COLUMNS, REQUIRED, WORKLOAD_COLUMNS, Measurement,
                           build_cluster, build_model, build_plan, load_measurements,
                           measurement, predict)

__all__ = ["BOUNDS", "CLUSTER_COLUMNS", "COLUMNS", "DTYPES", "FIT_FIELDS", "FitReport",
           "GPT_VOCAB", "MEASURED_COLUMN", "MODEL_COLUMNS", "Measurement", "PLAN_COLUMNS",
           "REQUIRED", "ROBUST_SCALE", "WORKLOAD_COLUMNS", "build_cluster", "build_model",
           "build_plan", "calibration_dict", "choose_fields", "fit_constants",
           "fit_measurements", "load_calibration", "load_measurements", "measurement", "predict",
           "save_calibration", "sensitivities"]
