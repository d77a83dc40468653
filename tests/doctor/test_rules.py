"""The rule base is data: every rule has a detector and every detector a rule, every rule says
when, why, how to check and what to do, and docs/doctor.md is generated from the table."""

from __future__ import annotations

from pathlib import Path

# from diagnosis, which imports every module that registers a detector (training's model_gap)
from bandwall.measure.doctor.diagnosis import DETECTORS
from bandwall.measure.doctor.docs import doctor_markdown
from bandwall.measure.doctor.rules import BY_CODE, RULES, Mechanism, Severity

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"


def test_every_rule_has_a_detector_and_every_detector_a_rule() -> None:
    assert set(DETECTORS) == set(BY_CODE)
    assert len(BY_CODE) == len(RULES)  # codes are unique


def test_every_rule_is_complete() -> None:
    for r in RULES:
        assert isinstance(r.severity, Severity) and isinstance(r.mechanism, Mechanism)
        assert r.title and r.when and r.impact and r.impact_source and r.confirm, r.code
        assert r.checks and r.fixes, r.code
        assert r.code == r.code.lower() and " " not in r.code


def test_severity_order() -> None:
    ranks = [s.rank for s in Severity]
    assert ranks == sorted(ranks, reverse=True) and Severity.INFO.rank == 0


def test_docs_are_generated_from_the_table() -> None:
    """docs/doctor.md is `python -m bandwall.measure.doctor.docs tests/doctor/corpus`:
    regenerate it when a rule, the corpus or a score changes."""
    doc = (ROOT / "docs" / "doctor.md").read_text()
    assert doc == doctor_markdown(CORPUS)
    for r in RULES:
        assert f"`{r.code}`" in doc
