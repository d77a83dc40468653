"""Cross-field rules (`bandwall.planning.rules`), tested from their own declarations: every
rule's example is refused naming the rule's field, in the library, the CLI and the web API
alike, and the request without the offending option is accepted (the rule, not something
else, refused it). docs/security.md's table is generated from the same list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bandwall.errors import ConfigError
from bandwall.planning.request import InferRequest, PlanRequest, make_infer_request, make_request
from bandwall.planning.rules import markdown, rule_examples

PLAN_RULES = [r for r in rule_examples(PlanRequest) if not r.serving_only]
SERVING_RULES = [r for r in rule_examples(InferRequest) if r.serving_only]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _ids(rules: list[Any]) -> list[str]:
    return [f"{r.field}:{'/'.join(map(str, r.example.values()))}" for r in rules]


def _argv(example: dict[str, Any]) -> list[str]:
    from bandwall.planning.request import field_flag

    out = []
    for k, v in example.items():
        flag = "--" + field_flag(k)
        if v is True:
            out.append(flag)
        elif v is False:
            out.append("--no-" + field_flag(k))
        else:
            out += [flag, str(v)]
    return out


@pytest.mark.parametrize("rule", PLAN_RULES, ids=_ids(PLAN_RULES))
def test_each_rule_refuses_its_example_naming_its_field(rule: Any) -> None:
    with pytest.raises(ConfigError) as err:
        make_request(**rule.example)
    assert err.value.field == rule.field
    rest = {k: v for k, v in rule.example.items() if k != rule.field}
    try:  # without the offending option, this rule no longer fires (another may)
        make_request(**rest)
    except ConfigError as other:
        assert other.field != rule.field, other


@pytest.mark.parametrize("rule", SERVING_RULES, ids=_ids(SERVING_RULES))
def test_each_serving_rule_refuses_its_example(rule: Any) -> None:
    with pytest.raises(ConfigError) as err:
        make_infer_request(**rule.example)
    assert err.value.field == rule.field


@pytest.mark.parametrize("rule", PLAN_RULES, ids=_ids(PLAN_RULES))
def test_cli_refuses_the_example_in_one_line(rule: Any, run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("plan", *_argv(rule.example))
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith(f"error: --{rule.field.replace('_', '-')}:"), r.err


@pytest.mark.parametrize("rule", PLAN_RULES, ids=_ids(PLAN_RULES))
def test_web_refuses_the_example_with_its_loc(rule: Any) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bandwall.web import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post("/api/plan", json=rule.example)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", rule.field]


def test_docs_table_is_generated_from_the_rules() -> None:
    assert markdown(PlanRequest) in DOCS.read_text(encoding="utf-8"), (
        "docs/security.md's rules table is stale; paste planning.rules.markdown(PlanRequest)"
    )
