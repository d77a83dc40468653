"""`bandwall doctor`: diagnose a real cluster from the evidence it already produces (NCCL's
debug log, nccl-tests output, PyTorch profiler traces), joined with the model.

Rules are data (`rules.RULES`), detectors one function per rule (`detectors.DETECTORS`), input
formats a registry (`formats.register_format`). Heavy modules (numpy, the model, the trace
reader) load only when a table or a trace needs them."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Diagnosis": "bandwall.measure.doctor.diagnosis",
    "Finding": "bandwall.measure.doctor.diagnosis",
    "diagnose": "bandwall.measure.doctor.diagnosis",
    "Rule": "bandwall.measure.doctor.rules",
    "RULES": "bandwall.measure.doctor.rules",
    "Severity": "bandwall.measure.doctor.rules",
    "Format": "bandwall.measure.doctor.formats",
    "register_format": "bandwall.measure.doctor.formats",
    "detector": "bandwall.measure.doctor.detectors",
    "Hit": "bandwall.measure.doctor.evidence",
    "Line": "bandwall.measure.doctor.evidence",
    "NcclLog": "bandwall.measure.doctor.nccl_log",
    "parse_nccl_log": "bandwall.measure.doctor.nccl_log",
    "html_section": "bandwall.measure.doctor.html",
    "busbw_comparison": "bandwall.measure.doctor.compare",
    "fit_gemm_efficiency": "bandwall.measure.doctor.compare",
    "infer_layout": "bandwall.measure.doctor.compare",
    "plan_comparison": "bandwall.measure.doctor.compare",
    "JobTrace": "bandwall.measure.doctor.trace",
    "RankTrace": "bandwall.measure.doctor.trace",
    "analyze_job": "bandwall.measure.doctor.trace",
    "analyze_trace": "bandwall.measure.doctor.trace",
    "iter_trace": "bandwall.measure.doctor.trace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bandwall.measure.doctor' has no attribute {name!r}")
