"""The dashboard's JSON API (with bad input), a schemathesis run against its OpenAPI schema,
the self-contained HTML report, and the page in real headless Chromium."""

from __future__ import annotations

import html.parser
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

fastapi = pytest.importorskip("fastapi", reason="web tests need the web extra")
from fastapi.testclient import TestClient  # noqa: E402

from bandwall.measure.bench import Store  # noqa: E402
from bandwall.web import create_app  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM = "/usr/bin/chromium"


def _seed_db(path: Path) -> int:
    with Store(path) as store:
        rid = store.start_run("collectives", 2, "gloo", {"hostname": "t"}, {"torch": "x"}, {})
        for size in (1 << 20, 4 << 20):
            store.add_result(
                rid,
                {
                    "op": "all_reduce",
                    "size_bytes": size,
                    "count": size // 4,
                    "dtype": "float32",
                    "inplace": 0,
                    "iters": 3,
                    "time_p10_s": 0.01,
                    "time_median_s": 0.011,
                    "time_p90_s": 0.012,
                    "time_p99_s": 0.013,
                    "time_min_s": 0.01,
                    "algbw_GBps": size / 0.011 / 1e9,
                    "busbw_GBps": size / 0.011 / 1e9,
                    "wrong": 0,
                },
            )
        store.finish_run(rid, "complete")
        return rid


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    db = tmp_path / "w.db"
    _seed_db(db)
    return TestClient(create_app(str(db)))


def test_plan_compare_collective_results(client: TestClient) -> None:
    r = client.post("/api/plan", json={"model": "llama3-70b", "gpus": 1024, "tp": 8, "pp": 4})
    assert r.status_code == 200
    d = r.json()
    assert d["layout"]["tp"] == 8 and 0 < d["comm_efficiency"] <= 1 and d["cost_usd"] > 0
    cmp_ = client.post(
        "/api/compare",
        json={
            "plan": {"model": "resnet50", "gpus": 16},
            "presets": ["ai-factory-ib", "decentralized-geo"],
        },
    )
    assert [p["cluster"]["preset"] for p in cmp_.json()] == ["ai-factory-ib", "decentralized-geo"]
    col = client.post("/api/collective", json={"ranks": 16, "sizes": "1M,1G"}).json()
    assert len(col) == 2 and set(col[0]) == {
        "op",
        "ranks",
        "size_bytes",
        "algo",
        "time_s",
        "algbw_GBps",
        "busbw_GBps",
    }
    runs = client.get("/api/results").json()
    assert runs[0]["rows"] == 2
    one = client.get(f"/api/results/{runs[0]['id']}").json()
    assert len(one["results"]) == 2
    png = client.get(f"/api/results/{runs[0]['id']}/busbw.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
    assert client.get("/api/results/999").status_code == 404
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "cdn" not in page.text.lower()
    assert client.get("/docs").status_code == 404  # Swagger UI would load from a CDN


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "gpt-9"}, "model"),
        ({"gpus": 0}, "gpus"),
        ({"gpus": 1000, "tp": 8, "pp": 4}, "gpus"),
        ({"gpus": 64, "tp": 16}, "tp"),
        ({"preset": "moon"}, "preset"),
        ({"fabric": "nvlink4"}, "fabric"),
        ({"model": "llama3-405b", "gpus": 8}, "memory"),
        ({"bandwidth_Gbps": -1}, "bandwidth_Gbps"),
        ({"wat": 1}, "wat"),
    ],
)
def test_bad_plan_input_is_422_naming_the_field(
    client: TestClient, body: dict[str, object], field: str
) -> None:
    r = client.post("/api/plan", json=body)
    assert r.status_code == 422, r.text
    locs = [d["loc"][-1] for d in r.json()["detail"]]
    assert field in locs


def test_bad_collective_input_is_422(client: TestClient) -> None:
    for body, field in (
        ({"op": "allgather2"}, "op"),
        ({"sizes": "12Q"}, "sizes"),
        ({"ranks": 1}, "ranks"),
        ({"algo": "tree", "op": "all_gather"}, "algo"),
    ):
        r = client.post("/api/collective", json=body)
        assert r.status_code == 422, (body, r.text)
        assert field in [d["loc"][-1] for d in r.json()["detail"]]


schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

_schema_db = Path(os.environ.get("TMPDIR", "/tmp")) / f"bandwall-schema-{os.getpid()}.db"
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(str(_schema_db)))


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_openapi_fuzz_finds_no_server_errors(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error])


class _Collect(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("src", "href") and v is not None:
                self.refs.append((tag, k, v))


def test_report_is_self_contained(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    rid = _seed_db(db)
    out = tmp_path / "report.html"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandwall",
            "report",
            "--model",
            "resnet50",
            "--gpus",
            "16",
            "--results",
            str(rid),
            "--db",
            str(db),
            "--scaling-gpus",
            "16:64:x2",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    p = _Collect()
    p.feed(text)
    imgs = [v for tag, _, v in p.refs if tag == "img"]
    assert len(imgs) >= 4  # breakdown, cost, scaling, busbw
    assert all(v.startswith("data:image/png;base64,") for v in imgs)
    assert not [v for _, _, v in p.refs if not v.startswith("data:")]  # no external URLs
    assert "<script" not in text and "Assumptions" in text and "decentralized-geo" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_dashboard_in_headless_chromium(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    db = tmp_path / "b.db"
    _seed_db(db)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bandwall", "serve", "--port", str(port), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/presets", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                    "--disable-sync",
                ],
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            step = page.locator('td[data-key="step time"]')
            step.wait_for(timeout=20_000)
            before = step.inner_text()
            bars_before = page.locator("#chart rect").count()
            assert bars_before >= 1
            page.select_option("#preset", "decentralized-colocated")
            page.fill("#gpus", "256")
            page.dispatch_event("#gpus", "change")
            page.wait_for_function(
                "() => document.querySelector('#status').innerText.includes('on 256 ×')",
                timeout=20_000,
            )
            assert page.locator('td[data-key="step time"]').inner_text() != before
            assert "decentralized-colocated" in page.locator("#status").inner_text()
            terms = page.locator("#chart rect").evaluate_all(
                "rs => rs.map(r => r.getAttribute('data-term'))"
            )
            assert "dp" in terms or "tp" in terms  # the slow fabric shows up as communication
            page.wait_for_function(
                "document.querySelectorAll('#compare tbody tr').length >= 5", timeout=20_000
            )
            page.fill("#gpus", "0")
            page.dispatch_event("#gpus", "change")
            page.wait_for_function(
                "document.querySelector('#status').className === 'error'", timeout=20_000
            )
            assert "gpus" in page.locator("#status").inner_text()
            page.fill("#gpus", "64")
            page.dispatch_event("#gpus", "change")
            page.locator("button[data-run]").first.click()
            page.wait_for_function(
                "document.querySelector('#run-chart').naturalWidth > 0", timeout=20_000
            )
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            browser.close()
        assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(tmp_path, ignore_errors=True)
