"""`--from` on sweep, compare and scale as a user types them, and the dashboard's upload."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
TITAN = [
    "--from",
    str(CONFIGS / "torchtitan" / "llama3_8b.toml"),
    "--from",
    str(CONFIGS / "torchtitan" / "1.llama_3_8b_torchtitan.sh"),
]


def test_sweep_from_a_config(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The file fixes the layout; the sweep varies the fabric bandwidth around it."""
    r = run_cli("sweep", *TITAN, "--bandwidth", "100Gbps,400Gbps", "--csv")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert len(rows) == 2
    assert {(row["gpus"], row["tp"], row["zero"], row["global_batch"]) for row in rows} == {
        ("32", "1", "3", "32")
    }
    assert "read:" in r.err and "--gpus 32 <-" in r.err


def test_compare_and_scale_from_a_config(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("compare", *TITAN, "--presets", "ai-factory-ib,ai-factory-roce", "--json")
    assert r.code == 0, r.err
    plans = json.loads(r.out)
    assert [p["layout"]["dp"] for p in plans] == [32, 32]
    # scale varies the GPU count: the file's count is the command line's to override
    r = run_cli("scale", *TITAN, "--gpus", "32,64", "--global-batch", "64", "--json")
    assert r.code == 0, r.err
    assert [p["layout"]["dp"] for p in json.loads(r.out)] == [32, 64]
    assert "the command line overrides: --global-batch" in r.err


def test_json_output_stays_clean(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("plan", *TITAN, "--gpu", "H100-SXM", "--json")
    assert r.code == 0
    assert json.loads(r.out)["layout"]["zero"] == 3  # the report went to stderr
    assert r.err.startswith("from ")


fastapi = pytest.importorskip("fastapi", reason="web tests need the web extra")
from fastapi.testclient import TestClient  # noqa: E402

from bandwall.web import create_app  # noqa: E402


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return TestClient(create_app(str(tmp_path / "w.db")), base_url="http://127.0.0.1")


def test_upload_gives_the_request_and_the_report(client: TestClient) -> None:
    files = [
        {"name": p.name, "content": p.read_text()}
        for p in (
            CONFIGS / "torchtitan" / "llama3_8b.toml",
            CONFIGS / "torchtitan" / "1.llama_3_8b_torchtitan.sh",
        )
    ]
    r = client.post("/api/from-config", json={"files": files, "overrides": {"gpu": "H100-SXM"}})
    assert r.status_code == 200, r.text
    d = r.json()
    assert (
        d["request"]["gpus"] == 32
        and d["request"]["zero"] == 3
        and d["request"]["gpu"] == "H100-SXM"
    )
    assert {f["path"] for f in d["from"]["files"]} == {
        "llama3_8b.toml",
        "1.llama_3_8b_torchtitan.sh",
    }
    assert any(i["key"] == "job.dump_folder" for i in d["from"]["ignored"])
    plan = client.post("/api/plan", json=d["request"])
    assert plan.status_code == 200 and plan.json()["layout"]["dp"] == 32


def test_upload_errors_are_422_without_server_paths(client: TestClient) -> None:
    bad = client.post("/api/from-config", json={"files": [{"name": "x.json", "content": "{"}]})
    assert bad.status_code == 422
    detail = bad.json()["detail"][0]
    assert detail["loc"] == ["body", "from"] and "x.json:1: invalid JSON" in detail["msg"]
    assert "/tmp" not in detail["msg"] and "bandwall-from-" not in detail["msg"]
    dup = [{"name": "a.toml", "content": ""}, {"name": "a.toml", "content": ""}]
    assert client.post("/api/from-config", json={"files": dup}).status_code == 422
    evil = client.post("/api/from-config", json={"files": [{"name": "../x.toml", "content": ""}]})
    assert evil.status_code == 422
    unknown = client.post(
        "/api/from-config",
        json={
            "files": [
                {
                    "name": "t.toml",
                    "content": (CONFIGS / "torchtitan" / "llama3_8b.toml").read_text(),
                }
            ],
            "overrides": {"gpus": 32, "nonsense": 1},
        },
    )
    assert unknown.status_code == 422


def test_the_read_lines_paste_back_as_the_same_plan(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Each `--flag value <- file:line` is what a user types: pasted onto the command line
    without --from it gives the same plan (it printed `--ffn 28,672`, which the CLI refuses,
    and booleans as `on`/`off`)."""
    config = str(Path(__file__).resolve().parents[2] / "examples" / "llama3_1_70b.yaml")
    report = run_cli("plan", "--from", config, "--json")
    flags: list[str] = []
    for line in report.err.splitlines():
        if line.startswith("  --") and " <- " in line:
            flags += line.split(" <- ")[0].split()
    assert "--ffn" in flags and "28672" in flags and "--sequence-parallel" in flags
    pasted = run_cli("plan", "--model", "custom", *flags, "--json")
    assert pasted.code == 0, pasted.err
    assert json.loads(pasted.out)["step_time_s"] == json.loads(report.out)["step_time_s"]
