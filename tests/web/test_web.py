"""The dashboard's JSON API (with bad input) and the self-contained HTML report. The OpenAPI
fuzzing is in tests/fuzz/test_web.py, the hardening in test_hardening.py and the page in
real headless Chromium in test_dashboard.py."""

from __future__ import annotations

import html.parser
import re
import subprocess
import sys
from pathlib import Path

import pytest

fastapi = pytest.importorskip("fastapi", reason="web tests need the web extra")
from fastapi.testclient import TestClient  # noqa: E402

from bandwall.web import create_app  # noqa: E402
from tests.web.seed import seed_db  # noqa: E402


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    db = tmp_path / "w.db"
    seed_db(db)
    return TestClient(create_app(str(db)), base_url="http://127.0.0.1")


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
    assert len(col) == 2 and set(col[0]) >= {  # the model may add columns (protocol)
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
    docs = client.get("/docs")  # FastAPI's own Swagger UI (its assets come from a CDN)
    assert docs.status_code == 200 and "/openapi.json" in docs.text


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
    rid = seed_db(db)
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
    # the report opens with what to pick, by which rule, and what it costs
    summary = text.index("<h2>Summary</h2>")
    assert summary < text.index("<table") and summary < text.index("<img")
    lead = text[summary : text.index("</div>", summary)]
    assert "Recommended: " in lead and "Rule: cheapest" in lead
    assert re.search(r"for <strong>\$[\d,]+(\.\d\d)?</strong>", lead)
    # bench rows read as sizes and durations, not raw bytes and floats
    assert "<td>1 MiB</td>" in text and "<td>4 MiB</td>" in text and "<td>11.00 ms</td>" in text
    cells = re.findall(r"<td>([^<]*)</td>", text)
    raw = [c for c in cells if re.fullmatch(r"-?\d+\.\d{4,}", c) or re.fullmatch(r"\d{5,}", c)]
    assert raw == [], raw  # no float noise, no long number without separators
