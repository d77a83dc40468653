"""`--csv` beside `--json` on every command that prints a table: the same numbers, one CSV line
per table row, nested fields as dotted columns."""

from __future__ import annotations

import csv
import io
import json

import pytest


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


PLAN = ("--model", "llama3-8b", "--gpus", "64", "--tp", "8")


def test_plan_csv_is_the_json_flattened(run_cli) -> None:  # type: ignore[no-untyped-def]
    as_json = json.loads(run_cli("plan", *PLAN, "--json").out)
    rows = _csv(run_cli("plan", *PLAN, "--csv").out)
    assert len(rows) == 1
    row = rows[0]
    assert float(row["step_time_s"]) == pytest.approx(as_json["step_time_s"], rel=1e-12)
    assert int(row["layout.tp"]) == as_json["layout"]["tp"] == 8
    assert float(row["breakdown.compute"]) == pytest.approx(
        as_json["breakdown"]["compute"], rel=1e-12
    )
    # booleans as the JSON and sweep's CSV spell them, so a plan row is a sweep row
    sweep = _csv(run_cli("sweep", *PLAN, "--csv").out)[0]
    assert row["valid"] == row["fits"] == sweep["valid"] == sweep["fits"] == "true"


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (("compare", *PLAN, "--presets", "ai-factory-ib,hyperscaler-vm"), 2),
        (("scale", "--model", "llama3-8b", "--gpus", "64,128,256", "--tp", "8"), 3),
        (("collective", "--op", "all_reduce", "--ranks", "16", "--sizes", "1M:8M"), 4),
        (("presets",), None),
        (("models",), None),
        (("catalog", "gpus"), None),
        (("validate", "--published"), None),
    ],
)
def test_table_commands_give_one_csv_line_per_json_row(  # type: ignore[no-untyped-def]
    run_cli, argv: tuple[str, ...], count: int | None
) -> None:
    doc = json.loads(run_cli(*argv, "--json").out)
    # validate --published: the CSV holds the reference rows, then the published runs
    json_rows = doc["rows"] + doc.get("runs", []) if isinstance(doc, dict) else doc
    rows = _csv(run_cli(*argv, "--csv").out)
    assert len(rows) == len(json_rows) and (count is None or len(rows) == count)
    assert rows and all(len(r) == len(rows[0]) for r in rows)


def test_catalog_csv_without_a_kind_names_each_row_s_table(run_cli) -> None:  # type: ignore[no-untyped-def]
    rows = _csv(run_cli("catalog", "--csv").out)
    assert {"gpus", "fabrics", "providers"} <= {r["table"] for r in rows}


def test_json_and_csv_together_is_refused(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("plan", *PLAN, "--json", "--csv")
    assert r.code == 2 and r.err.strip().startswith("error: --csv:")
    assert len(r.err.strip().splitlines()) == 1
