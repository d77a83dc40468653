"""Calibrate the model against measurements and validate it against published runs."""

from bandwall.measure.calibrate.fit import (
    fit_run,
    load_run,
    nominal_rate_Gbps,
    predict_train,
    save_profile,
    validate_run,
)
from bandwall.measure.calibrate.published import find_reference_dir, validate_published

__all__ = [
    "find_reference_dir",
    "fit_run",
    "load_run",
    "nominal_rate_Gbps",
    "predict_train",
    "save_profile",
    "validate_published",
    "validate_run",
]
