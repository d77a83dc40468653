"""Doctor against its labelled corpus of real public logs (tests/doctor/corpus): the labels and
the split are intact, the scores on the build and the held-out part are printed and meet the
acceptance thresholds, and no finding ever quotes a line that is not in its input."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bandwall.measure.doctor.corpus import HEALTHY, Scores, evaluate, labels, split_of
from bandwall.measure.doctor.diagnosis import diagnose
from bandwall.measure.doctor.rules import BY_CODE
from bandwall.safeio import iter_lines

CORPUS = Path(__file__).resolve().parent / "corpus"
ROWS = labels(CORPUS)
FILES = sorted(CORPUS.glob("*.log"))


def test_corpus_labels_and_split_are_intact() -> None:
    assert len(ROWS) >= 80
    assert sorted(r["id"] for r in ROWS) == sorted(p.stem for p in FILES)
    for r in ROWS:
        assert r["cause"] == HEALTHY or r["cause"] in BY_CODE, r
        assert r["split"] == split_of(r["id"]), f"{r['id']}: split must follow sha256 % 3"
        # a public thread, page or post anyone can open (issue 27 names forums too)
        assert re.fullmatch(r"https://[\w.-]+\.[a-z]{2,}/\S*", r["source"]), r["id"]
        assert r["established"] and r["mechanism"] and r["retrieved"], r["id"]
    assert sum(r["split"] == "heldout" for r in ROWS) >= len(ROWS) // 4
    assert sum(r["cause"] == HEALTHY for r in ROWS if r["split"] == "heldout") >= 2


def test_accuracy_on_the_build_and_held_out_parts(capsys: object) -> None:
    scores = evaluate(CORPUS)
    out = {}
    for split in ("build", "heldout"):
        s = Scores.summary(scores.part(split))
        out[split] = s
        print(
            f"{split}: {s['excerpts']} excerpts ({s['faults']} faults, {s['healthy']} healthy): "
            f"top-1 {s['top1']:.1%}, top-3 {s['top3']:.1%}, named {s['named']:.1%}, "
            f"healthy runs with a finding above info: {s['healthy_false_alarms']}"
        )
        for r in scores.part(split):
            right = (r.cause == HEALTHY and not r.ranked) or (r.ranked and r.ranked[0] == r.cause)
            if not right:
                print(f"  {split} miss: {r.id} ({r.cause}) -> {r.ranked[:3]}")
    for split in ("build", "heldout"):
        assert out[split]["healthy_false_alarms"] == 0, (split, out[split])
    # issue 27 asks for top-1 >= 80% and named >= 90% on a held-out third. Blind sets 9-26
    # joined the corpus (2026-12-06/07, each scored once before it joined, the last nine
    # fault sets at 33%, 33%, 50%, 100%, 0%, 71%, 83%, 80% and 40% top-1; set 25, 17 healthy
    # runs, 1 false alarm from a cut line, fixed); since set 26 the held-out part names 47 of
    # 60 causes at top-1 (78.3%: set 26's held-out excerpts, 2 of 5 right, were seen when it
    # was scored; no rule came from them) and 48 anywhere (80.0%), the build part 100 of 112
    # anywhere (89.3%). No rule is written from a held-out miss: these floors guard against
    # regression just under today's figures; they do not claim the targets (neither is met on
    # the held-out part)
    assert out["build"]["top1"] >= 0.80 and out["build"]["named"] >= 0.88, out["build"]
    assert out["heldout"]["top1"] >= 0.78 and out["heldout"]["named"] >= 0.79, out["heldout"]


def _input_lines(path: Path) -> list[str]:
    return list(iter_lines(path, field="paths"))


def _check_evidence(paths: list[Path]) -> None:
    diag = diagnose([str(p) for p in paths])
    lines = {str(p): _input_lines(p) for p in paths}
    for f in diag.findings:
        for ln in f.evidence:
            text = lines[ln.source][ln.number - 1]
            assert ln.text == text, (f.code, ln)
            assert ln.quote() in text, (f.code, ln)
            assert ln.quote().strip(), (f.code, ln)


def test_every_finding_quotes_its_input_verbatim() -> None:
    for path in FILES:
        _check_evidence([path])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_excerpts_of_excerpts_quote_only_what_they_hold(data: st.DataObject) -> None:
    """Cut any corpus log anywhere, shuffle its lines, join two: findings still quote only
    lines of the input they were given."""
    path = data.draw(st.sampled_from(FILES))
    lines = _input_lines(path)
    keep = data.draw(st.lists(st.sampled_from(lines), min_size=1, max_size=40))
    other = data.draw(st.sampled_from(FILES))
    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / "a.log"
        a.write_text("\n".join(keep) + "\n")
        _check_evidence([a, other])
