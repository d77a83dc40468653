"""The dashboard in real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright)
against a real `bandwall serve`: the form has every request field, a plan shows its result,
an error shows next to its field and clears the old result, the address restores the same
plan, and the stored runs (or the one-line reason they cannot be read) show. Screenshots of
the page go to docs/ for a person to look at."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="web tests need the web extra")
if not os.path.exists("/usr/bin/chromium"):
    pytest.skip("Debian chromium not installed", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

from bandwall.model.vocab import Recompute  # noqa: E402
from bandwall.planning.request import PlanRequest, field_meta  # noqa: E402
from tests.web.seed import CHROMIUM, CHROMIUM_ARGS, running_server, seed_db  # noqa: E402

WAIT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("dash") / "b.db"
    seed_db(db)
    with running_server("--db", str(db)) as url:
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    yield p
    context.close()
    assert errors == []  # no JavaScript exception on the page


def _planned(page: Any, text: str) -> None:
    page.wait_for_function(
        "t => document.querySelector('#status').className === 'ok' && "
        "document.querySelector('#status').innerText.includes(t)",
        arg=text,
        timeout=WAIT_MS,
    )


def _step(page: Any) -> str:
    return str(page.locator('td[data-key="step time"]').inner_text())


def test_form_has_every_request_field(page: Any, base: str, docs_out: Path) -> None:
    page.goto(base + "/")
    page.locator('td[data-key="step time"]').wait_for(timeout=WAIT_MS)
    fields = page.locator("[data-field]").evaluate_all("els => els.map(e => e.dataset.field)")
    assert fields == list(PlanRequest.model_fields)  # all of them, in the schema's order
    groups = page.locator("details.group").evaluate_all("els => els.map(e => e.dataset.group)")
    assert groups == list(dict.fromkeys(field_meta(n)["group"] for n in PlanRequest.model_fields))
    for name, info in PlanRequest.model_fields.items():
        control = page.locator(f"#{name}")
        tag, kind = control.evaluate("e => [e.tagName, e.type]")
        row = page.locator(f'[data-field="{name}"]')
        assert row.locator(".help").text_content() == (info.description or "").strip()
        if info.annotation is bool:
            assert kind == "checkbox" and control.is_checked() is info.default
        elif field_meta(name).get("choices") or hasattr(info.annotation, "__members__"):
            assert tag == "SELECT" or control.get_attribute("list"), name
        if field_meta(name)["group"] == "layout" and info.default is None:
            assert control.input_value() == "" and control.get_attribute("placeholder") == "search"
    enum = page.locator("#recompute option").evaluate_all("os => os.map(o => o.value)")
    assert set(enum) == {r.value for r in Recompute}


def test_plan_error_next_to_field_and_shareable_address(
    page: Any, base: str, docs_out: Path
) -> None:
    page.goto(base + "/")
    page.locator('td[data-key="step time"]').wait_for(timeout=WAIT_MS)
    page.select_option("#model", "llama3-70b")
    page.fill("#gpus", "512")
    page.fill("#tp", "8")
    page.click("#run")
    _planned(page, "on 512 ×")
    assert "Llama 3 70B" in page.locator("#status").inner_text()
    assert "tp=8 " in page.locator('td[data-key="layout"]').inner_text()
    page.wait_for_function(
        "document.querySelectorAll('#compare tbody tr').length >= 5", timeout=WAIT_MS
    )
    step = _step(page)
    cost = page.locator('td[data-key="cost"]').inner_text()
    assert re.fullmatch(r"\$[\d,]+", cost)  # dollars with thousands separators
    address = page.url
    assert "model=llama3-70b" in address and "gpus=512" in address and "tp=8" in address
    page.screenshot(path=str(docs_out / "dashboard.png"), full_page=True)

    # an error: the message sits next to the field it names, and the old result is gone
    page.fill("#tp", "3")
    page.dispatch_event("#tp", "change")
    page.wait_for_function(
        "document.querySelector('#status').className === 'error'", timeout=WAIT_MS
    )
    where = page.locator(".field-error:not(:empty)")
    assert where.count() >= 1
    named = where.first.evaluate("e => e.closest('[data-field]').dataset.field")
    assert named in ("tp", "gpus")
    assert page.locator(f"#{named}").get_attribute("aria-invalid") == "true"
    assert page.locator(f"#{named}-error").inner_text().strip()
    assert page.locator('td[data-key="step time"]').count() == 0
    assert page.locator("#chart rect").count() == 0
    assert page.locator("#compare tbody tr").count() == 0
    page.screenshot(path=str(docs_out / "dashboard-error.png"), full_page=True)

    # the address of the good plan restores the form and the same result
    fresh = page.context.new_page()
    fresh.goto(address)
    _planned(fresh, "on 512 ×")
    assert fresh.input_value("#gpus") == "512" and fresh.input_value("#tp") == "8"
    assert fresh.input_value("#model") == "llama3-70b"
    assert _step(fresh) == step
    assert fresh.locator('td[data-key="cost"]').inner_text() == cost
    fresh.reload()
    _planned(fresh, "on 512 ×")
    assert _step(fresh) == step


def test_preset_compare_and_stored_runs(page: Any, base: str, docs_out: Path) -> None:
    """The first dashboard test's checks, kept: preset change, compare table, error status,
    and a stored run's chart."""
    page.goto(base + "/")
    step = page.locator('td[data-key="step time"]')
    step.wait_for(timeout=WAIT_MS)
    before = step.inner_text()
    assert page.locator("#chart rect").count() >= 1
    page.select_option("#preset", "decentralized-colocated")
    page.fill("#gpus", "256")
    page.dispatch_event("#gpus", "change")
    _planned(page, "on 256 ×")
    assert page.locator('td[data-key="step time"]').inner_text() != before
    assert "decentralized-colocated" in page.locator("#status").inner_text()
    terms = page.locator("#chart rect").evaluate_all(
        "rs => rs.map(r => r.getAttribute('data-term'))"
    )
    assert "dp" in terms or "tp" in terms  # the slow fabric shows up as communication
    page.wait_for_function(
        "document.querySelectorAll('#compare tbody tr').length >= 5", timeout=WAIT_MS
    )
    page.fill("#gpus", "0")
    page.dispatch_event("#gpus", "change")
    page.wait_for_function(
        "document.querySelector('#status').className === 'error'", timeout=WAIT_MS
    )
    assert "gpus" in page.locator("#status").inner_text()
    assert page.locator("#gpus-error").inner_text().strip()
    page.fill("#gpus", "64")
    page.dispatch_event("#gpus", "change")
    _planned(page, "on 64 ×")
    page.locator("button[data-run]").first.click()
    page.wait_for_function("document.querySelector('#run-chart').naturalWidth > 0", timeout=WAIT_MS)
    page.screenshot(path=str(docs_out / "dashboard-runs.png"), full_page=True)


def test_unreadable_database_and_token(page: Any, tmp_path: Path) -> None:
    """A corrupt --db shows as one line naming the file; the planner still works; with a
    token the page takes it from the address and keeps it out of the shared address."""
    db = tmp_path / "corrupt.db"
    db.write_bytes(b"not a database " * 400)
    token = "dashboard-test-token-123"
    with running_server("--db", str(db), "--token", token, token=token) as url:
        page.goto(f"{url}/?token={token}&gpus=16&model=resnet50")
        _planned(page, "on 16 ×")
        page.wait_for_function(
            "document.querySelector('#runs-status').className === 'error'", timeout=WAIT_MS
        )
        line = page.locator("#runs-status").inner_text()
        assert str(db) in line and "\n" not in line.strip()
        assert "token" not in page.url and "gpus=16" in page.url
        page.reload()  # the token survives a reload of the shareable address
        _planned(page, "on 16 ×")


def _cli_plan(*args: str) -> dict[str, Any]:
    import contextlib
    import io
    import json

    from bandwall.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", *args, "--json"]) == 0
    return dict(json.loads(out.getvalue()))


def test_default_dashboard_plan_equals_the_cli_plan(page: Any, base: str) -> None:
    """Issue 24: the page at its defaults sends nothing the CLI would not (the nullable
    in_network used to go as false, turning NVLS off) and gets the CLI's plan, field by
    field; the step time it shows is that plan's."""
    with page.expect_request("**/api/plan") as sent, page.expect_response("**/api/plan") as got:
        page.goto(base + "/")
    assert sent.value.post_data_json == {}  # every field at its default
    dashboard = got.value.json()
    cli = _cli_plan()
    assert dashboard == cli
    page.locator('td[data-key="step time"]').wait_for(timeout=WAIT_MS)
    shown = page.locator('td[data-key="step time"]').inner_text()
    assert shown.endswith((" s", " ms")) and float(shown.split()[0]) == pytest.approx(
        cli["step_time_s"] * (1e3 if shown.endswith(" ms") else 1), rel=0.01
    )


def test_nullable_booleans_have_three_states(page: Any, base: str) -> None:
    page.goto(base + "/")
    page.locator('td[data-key="step time"]').wait_for(timeout=WAIT_MS)
    options = page.locator("#in_network option").evaluate_all("os => os.map(o => o.value)")
    assert options == ["", "true", "false"]
    assert page.input_value("#in_network") == ""
    for value, flag in (("true", "--in-network"), ("false", "--no-in-network")):
        with (
            page.expect_request("**/api/plan") as sent,
            page.expect_response("**/api/plan") as got,
        ):
            page.select_option("#in_network", value)
        assert sent.value.post_data_json == {"in_network": value == "true"}
        assert got.value.json()["step_time_s"] == _cli_plan(flag)["step_time_s"]
        assert f"in_network={value}" in page.url


def test_an_unknown_value_in_the_address_is_refused_next_to_its_field(page: Any, base: str) -> None:
    """`?preset=ai-factory` (not a preset) used to show an empty dropdown and plan on the
    default preset; now the value is kept, sent, and refused next to the field, in view."""
    page.set_viewport_size({"width": 900, "height": 600})
    page.goto(base + "/?preset=ai-factory&gpus=64")
    page.wait_for_function(
        "document.querySelector('#status').className === 'error'", timeout=WAIT_MS
    )
    assert page.input_value("#preset") == "ai-factory"
    assert page.locator("#preset-error").inner_text().strip()
    assert page.locator("#preset").get_attribute("aria-invalid") == "true"
    assert page.locator('td[data-key="step time"]').count() == 0
    in_view = page.locator("#preset").evaluate(
        "e => { const r = e.getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    assert in_view


def test_an_error_after_plan_is_scrolled_into_view(page: Any, base: str) -> None:
    page.set_viewport_size({"width": 900, "height": 500})
    page.goto(base + "/")
    page.locator('td[data-key="step time"]').wait_for(timeout=WAIT_MS)
    page.fill("#gpus", "0")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the user is far below
    page.click("#run")
    page.wait_for_function(
        "document.querySelector('#status').className === 'error'", timeout=WAIT_MS
    )
    box = page.locator("#gpus").evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom, innerHeight]; }"
    )
    assert box[0] >= 0 and box[1] <= box[2], box
    assert page.evaluate("document.activeElement.id") == "gpus"


@pytest.mark.parametrize("width", [1400, 1000, 700])
def test_tables_fit_the_window_and_the_api_docs_are_linked(
    page: Any, base: str, width: int
) -> None:
    """No table is cut at the window's edge: each fits, or scrolls inside its own box."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(base + "/")
    page.wait_for_function(
        "document.querySelectorAll('#compare tbody tr').length >= 5", timeout=WAIT_MS
    )
    cut = page.evaluate(
        "() => [...document.querySelectorAll('table')].filter(t => {"
        " const box = t.parentElement.getBoundingClientRect();"
        " const scrolls = getComputedStyle(t.parentElement).overflowX === 'auto';"
        " return box.right > innerWidth + 1 || (!scrolls && t.scrollWidth > box.width + 1); })"
        ".map(t => t.id)"
    )
    assert cut == []
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1")
    assert page.get_attribute("#docs-link", "href") == "/docs"
