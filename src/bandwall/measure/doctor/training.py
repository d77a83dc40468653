"""Training logs in doctor: the `training-log` format (Megatron-LM, NeMo, torchtitan,
DeepSpeed, HF Trainer, Lightning; `bandwall.measure.importers.training_log`), the comparison
of each log with the model for the job `--from` describes (or the log's own Megatron
arguments; `bandwall.measure.importers.run_compare`), the `model_gap` detector, and the lines
the text and JSON reports show. Registered on import, like `builtin_formats`."""

from __future__ import annotations

from typing import Any

from bandwall.errors import ConfigError
from bandwall.measure.doctor.detectors import CERTAIN, detector
from bandwall.measure.doctor.evidence import Hit
from bandwall.measure.doctor.formats import Format, register_format
from bandwall.measure.doctor.job import Input, Job
from bandwall.measure.importers.training_log import LogParser, TrainingLog, is_training_log

LOGS = "training-log"
COMPARISONS = "training-comparison"


def _attach(job: Job, log: TrainingLog, item: Input) -> bool:
    if not log.steps and not log.timers_ms:
        return False
    job.extra.setdefault(LOGS, []).append(log)
    item.notes.append(f"training log ({log.framework}): {len(log.by_step()):,} step(s)")
    item.notes += log.notes  # what the reader skipped or cut, so the count is read with it
    return True


register_format(Format(name=LOGS, detect=is_training_log, start=LogParser, attach=_attach))


def compare(job: Job, request: Any, given: dict[str, Any]) -> None:
    """Each training log against the model; a log that cannot be compared gets a note."""
    from bandwall.measure.importers.run_compare import compare as compare_log
    from bandwall.measure.importers.run_compare import request_for_log

    for log in job.extra.get(LOGS, []):
        item = next((i for i in job.inputs if i.path == log.path), None)
        try:
            req = request if request is not None else request_for_log(log.path, None, given)[0]
            job.extra.setdefault(COMPARISONS, []).append(compare_log(log, req))
        except ConfigError as exc:
            note = f"training log ({log.framework}), not compared: {exc.reason}"
            (item.notes if item is not None else job.notes).append(note)


@detector("model_gap")
def _model_gap(job: Job) -> list[Hit]:
    from bandwall.measure.importers.run_compare import TERMS, WHY

    hits = []
    for c in job.extra.get(COMPARISONS, []):
        if c.gap_s is None or c.gap_term is None or c.measured_step_s is None:
            continue
        step, predicted = c.measured_step_s, c.predicted["step_time_s"]
        term = TERMS.get(c.gap_term, c.gap_term)
        best = c.changes[0] if c.changes else None
        reason = (
            f"measured {step:,.3g} s per step, the model {predicted:,.3g} s; {term} would have "
            f"to be {c.gap_factor:.3g} × the model's to explain it (the smallest change of any "
            f"term); likely {WHY.get(c.gap_term, 'a term the model underprices')}"
            + (
                f". The model's best change: {best['flags']} -> {best['model_step_s']:,.3g} s "
                f"(-{best['model_gain_share']:.0%})"
                if best
                else ""
            )
        )
        share = c.gap_s / step
        hits.append(
            Hit(
                "model_gap",
                [],
                reason,
                CERTAIN,
                severity="high" if share > 0.3 else "medium" if share > 0.1 else "info",
                title=f"Step {c.gap_s / predicted:+.0%} against the model: {term}",
                # a run faster than the model costs nothing: no cost line rather than
                # '- 0.0 ms/step' under a -19% title (fuzz round 20, D5)
                cost_s=c.gap_s if c.gap_s > 0 else None,
                step_s=step,
                cost_basis="measured step minus the model's",
                source=c.log,
            )
        )
    return hits


def render_lines(job: Job, width: int = 80) -> list[str]:
    """The comparison tables (run_compare.render), each after a blank line."""
    from bandwall.measure.importers.run_compare import render

    out: list[str] = []
    for c in job.extra.get(COMPARISONS, []):
        out += ["", *render(c)]
    return out


def to_json(job: Job) -> list[dict[str, Any]]:
    return [c.to_json() for c in job.extra.get(COMPARISONS, [])]


__all__ = ["COMPARISONS", "LOGS", "compare", "render_lines", "to_json"]
