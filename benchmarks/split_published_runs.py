"""Check (or write) the fit/held-out split of the published training runs.

The split is fixed by the row id alone, decided before any prediction is compared with the
rows: a row is `fit` when int(sha256(id), 16) % 3 == 0, else `heldout` (about a third fitted,
as the project brief allows at most). Exit 1 and name the row when a split cell disagrees with
the rule or an id repeats, so a hand edit cannot move a row between the halves unnoticed.

Run: python benchmarks/split_published_runs.py [CSV] [--write]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import sys
from collections import Counter
from pathlib import Path

DEFAULT_CSV = (
    Path(__file__).resolve().parents[1] / "src/bandwall/measure/calibrate/data/published_runs.csv"
)


def split_for(row_id: str) -> str:
    """The split a row id belongs to; only the id decides, never the row's numbers."""
    return "fit" if int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % 3 == 0 else "heldout"


def problems(rows: list[dict[str, str]]) -> list[str]:
    """One line per repeated id or split cell that disagrees with `split_for`."""
    out = [
        f"id {i!r} appears {n} times" for i, n in Counter(r["id"] for r in rows).items() if n > 1
    ]
    out += [
        f"row {r['id']!r}: split {r['split']!r}, the rule gives {split_for(r['id'])!r}"
        for r in rows
        if r["split"] != split_for(r["id"])
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--write", action="store_true", help="rewrite the split column")
    args = parser.parse_args(argv)
    with args.csv.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    if "id" not in fields or "split" not in fields:
        print(f"{args.csv}: needs 'id' and 'split' columns", file=sys.stderr)
        return 1
    if args.write:
        for r in rows:
            r["split"] = split_for(r["id"])
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    found = problems(rows)
    for line in found:
        print(line, file=sys.stderr)
    counts = Counter(r["split"] for r in rows)
    print(f"{len(rows):,} rows: {counts['fit']:,} fit, {counts['heldout']:,} held out")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
