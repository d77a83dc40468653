"""Calibrate the model against measurements and validate it against published runs."""

from bandwall.calibrate.published import find_reference_dir, validate_published

__all__ = ["find_reference_dir", "validate_published"]
