"""What a finding may quote, and what a detector returns.

A `Line` is one line of an input exactly as it was read (after safeio's cut at 16k characters);
doctor never quotes anything else, so every piece of evidence can be found in the file it names
(a property test checks this over the corpus). A `Hit` is one detector's conclusion: the rule,
the lines, the facts that word the reason, how sure it is and, when the evidence is partial,
what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

#: Characters of a line a finding shows (JSON keeps this much; the text view wraps it).
QUOTE_CHARS = 400


@dataclass(frozen=True, slots=True)
class Line:
    """One input line, verbatim."""

    source: str
    number: int
    text: str
    host: str | None = None

    def quote(self) -> str:
        """The informative part of the line: from its first `NCCL WARN/INFO` marker when the
        `host:pid:tid [dev] file.cc:N` prefix would crowd it out, cut to QUOTE_CHARS. Always a
        substring of the input line."""
        body = self.text.strip()
        i = body.find("NCCL ")
        if i > 40 and body[i + 5 : i + 9] in ("WARN", "INFO", "ERRO", "ABOR"):
            body = body[i:]
        return body if len(body) <= QUOTE_CHARS else body[:QUOTE_CHARS]

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "line": self.number,
            "text": self.quote(),
            "truncated": len(self.text.strip()) > QUOTE_CHARS,
        }


class Confidence(IntEnum):
    """How directly the evidence names the cause (ranks findings before severity)."""

    POSSIBLE = 1
    """One of several causes the evidence is consistent with."""
    LIKELY = 2
    """The evidence points at it, but another cause could print the same."""
    CERTAIN = 3
    """NCCL (or PyTorch) states it."""


@dataclass
class Hit:
    """A detector's conclusion about one rule."""

    code: str
    lines: list[Line] = field(default_factory=list)
    reason: str = ""
    """The case-specific part of the explanation (the rule supplies the rest)."""
    confidence: Confidence = Confidence.LIKELY
    severity: str | None = None
    """Overrides the rule's severity (e.g. a fallback that is certain becomes critical)."""
    missing: str = ""
    """What the evidence lacks to be sure (said in the finding with the rule's `confirm`)."""
    title: str | None = None
    """Overrides the rule's title (e.g. naming the collective that timed out)."""
    cost_s: float | None = None
    step_s: float | None = None
    cost_basis: str = ""
    source: str = ""


def first(lines: list[Line], n: int = 3) -> list[Line]:
    """The first `n` distinct lines (by text), in input order."""
    seen: set[str] = set()
    out: list[Line] = []
    for line in lines:
        key = line.text.strip()
        if key in seen:
            continue
        seen.add(key)
        out.append(line)
        if len(out) == n:
            break
    return out
