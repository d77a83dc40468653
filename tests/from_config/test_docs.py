"""docs/from-config.md carries the field tables as the code declares them."""

from __future__ import annotations

from pathlib import Path

from bandwall.planning.from_config.report import mapping_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "from-config.md"


def test_docs_field_tables_match_the_code() -> None:
    text = DOC.read_text()
    start = text.index("<!-- generated: from_config tables -->\n") + len(
        "<!-- generated: from_config tables -->\n"
    )
    end = text.index("<!-- end generated -->")
    assert text[start:end] == mapping_markdown(), "regenerate with report.mapping_markdown()"
