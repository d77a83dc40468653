"""`bandwall doctor`: diagnose a real cluster from the evidence it already produces (NCCL's
debug log, nccl-tests output, PyTorch profiler traces), joined with the model."""

from bandwall.measure.doctor.compare import (
    busbw_comparison,
    fit_gemm_efficiency,
    infer_layout,
    plan_comparison,
)
from bandwall.measure.doctor.diagnosis import Diagnosis, diagnose
from bandwall.measure.doctor.findings import Finding, log_findings
from bandwall.measure.doctor.html import html_section
from bandwall.measure.doctor.nccl_log import NcclLog, parse_nccl_log
from bandwall.measure.doctor.trace import (
    JobTrace,
    RankTrace,
    analyze_job,
    analyze_trace,
    iter_trace,
)

__all__ = [
    "Diagnosis",
    "Finding",
    "JobTrace",
    "NcclLog",
    "RankTrace",
    "analyze_job",
    "analyze_trace",
    "busbw_comparison",
    "diagnose",
    "fit_gemm_efficiency",
    "html_section",
    "infer_layout",
    "iter_trace",
    "log_findings",
    "parse_nccl_log",
    "plan_comparison",
]
