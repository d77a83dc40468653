"""Presentation: terminal tables for plans, comparisons and validations."""

from bandwall.report.tables import (
    compare_table,
    format_duration,
    plan_tables,
    scale_table,
    validation_table,
)

__all__ = ["compare_table", "format_duration", "plan_tables", "scale_table", "validation_table"]
