"""Score doctor against a labelled corpus (tests/doctor/corpus: one `<id>.log` per excerpt and
`labels.csv` with the cause each thread established and the fixed build/held-out split).

An excerpt counts as right at top-1 when the first finding above `info` names its cause, at
top-3 when one of the first three does, and "named" when any finding does; a `healthy`
excerpt is right when no finding is above `info` (anything above is a false alarm).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

from bandwall.safeio import read_text

HEALTHY = "healthy"


def split_of(excerpt_id: str) -> str:
    """The split rule fixed before any rule was written: sha256(id) % 3 == 0 -> held out."""
    return (
        "heldout" if int(hashlib.sha256(excerpt_id.encode()).hexdigest(), 16) % 3 == 0 else "build"
    )


@dataclass
class Result:
    id: str
    cause: str
    split: str
    ranked: list[str]
    """Codes of the findings above info, in rank order."""


@dataclass
class Scores:
    results: list[Result] = field(default_factory=list)

    def part(self, split: str) -> list[Result]:
        return [r for r in self.results if r.split == split]

    @staticmethod
    def summary(results: list[Result]) -> dict[str, float | int]:
        faults = [r for r in results if r.cause != HEALTHY]
        healthy = [r for r in results if r.cause == HEALTHY]
        n = len(faults) or 1
        return {
            "excerpts": len(results),
            "faults": len(faults),
            "healthy": len(healthy),
            "top1": sum(bool(r.ranked) and r.ranked[0] == r.cause for r in faults) / n,
            "top3": sum(r.cause in r.ranked[:3] for r in faults) / n,
            "named": sum(r.cause in r.ranked for r in faults) / n,
            "healthy_false_alarms": sum(bool(r.ranked) for r in healthy),
        }


def labels(corpus: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(corpus / "labels.csv", field="corpus"))))


def evaluate(corpus: Path) -> Scores:
    """Diagnose every excerpt on its own and record the ranked codes."""
    from bandwall.measure.doctor.diagnosis import diagnose

    scores = Scores()
    for row in labels(corpus):
        diag = diagnose([str(corpus / f"{row['id']}.log")])
        ranked = [f.code for f in diag.findings if f.severity != "info"]
        scores.results.append(Result(row["id"], row["cause"], row["split"], ranked))
    return scores
