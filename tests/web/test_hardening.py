"""Issue 14: input that used to kill the server or answer 500, a database that is not ours,
and a server that would listen on every interface without asking. Each answer is a 4xx/5xx
with one readable line, and the server keeps serving after it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="web tests need the web extra")
from fastapi.testclient import TestClient

from bandwall.cli.show import is_loopback, serve_token
from bandwall.errors import ConfigError
from bandwall.web import create_app
from bandwall.web.app import MAX_BODY_BYTES, MAX_COLLECTIVE_SIZES, strict_json_error
from tests.web.seed import running_server, seed_db

POSTS = ("/api/plan", "/api/compare", "/api/collective")


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    db = tmp_path / "h.db"
    seed_db(db)
    return TestClient(create_app(str(db)), base_url="http://127.0.0.1")


def _locs(r: object) -> list[list[str]]:
    return [d["loc"] for d in r.json()["detail"]]  # type: ignore[attr-defined]


# --- item 1: the collective endpoint bounds its work before doing it ------------------------


@pytest.mark.parametrize(
    "sizes",
    ["1K:1T:x1.0000001", "1:1T:+1", "1:1T:x1.001", "1K:2K:x1e-300", "1:1T:x1.0", "8:1T:xnan"],
)
def test_hostile_collective_ranges_are_422_at_once(client: TestClient, sizes: str) -> None:
    start = time.monotonic()
    r = client.post("/api/collective", json={"sizes": sizes})
    assert time.monotonic() - start < 2
    assert r.status_code == 422, r.text
    assert ["body", "sizes"] in _locs(r)
    assert client.post("/api/collective", json={"sizes": "1K:4K"}).status_code == 200  # alive


def test_collective_caps_sizes_per_request(client: TestClient) -> None:
    """parse_size_range allows 10,000 values; one web call prices at most 1,024."""
    r = client.post("/api/collective", json={"sizes": "1:1T:x1.01", "ranks": 1_048_576})
    assert r.status_code == 422 and ["body", "sizes"] in _locs(r)
    assert f"at most {MAX_COLLECTIVE_SIZES:,}" in r.json()["detail"][0]["msg"]
    # rounded to whole bytes, x1.026 from 1 B gives 976 distinct sizes (the first repeat)
    biggest = client.post("/api/collective", json={"sizes": "1:1T:x1.026", "ranks": 1_048_576})
    assert biggest.status_code == 200 and 900 < len(biggest.json()) <= MAX_COLLECTIVE_SIZES


# --- item 6: JSON Python accepts but JSON is not, and bodies without bound ------------------

BAD_JSON = [
    b'{"gpus": NaN}',
    b'{"gpus": -Infinity}',
    b'{"gpus": 1e999}',
    b'{"bandwidth_Gbps": 1e400}',
    b'{"model": "\\ud800"}',
    b'{"\\udfff": 1}',
    b'{"model": "llama\xff"}',
    b"[" * 30_000 + b"]" * 30_000,
    b'{"gpus": ' + b"9" * 5_000 + b"}",
    b'{"gpus": 8',
]


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("body", BAD_JSON, ids=lambda b: b[:24].decode("latin-1"))
def test_non_json_numbers_and_text_are_422_not_500(
    client: TestClient, path: str, body: bytes
) -> None:
    r = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert _locs(r)[0][0] == "body"
    json.loads(r.text)  # the answer itself is strict JSON


def test_nested_values_are_checked_too(client: TestClient) -> None:
    body = b'{"plan": {"gpus": NaN}, "presets": ["ai-factory-ib"]}'
    r = client.post("/api/compare", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "NaN" in r.json()["detail"][0]["msg"]


def test_strict_json_accepts_ordinary_json() -> None:
    assert strict_json_error(b'{"gpus": 8, "tokens": 1.5e12, "model": "llama3-8b \\u00e9"}') is None
    assert strict_json_error(b'{"x": "\\ud83d\\ude00"}') is None  # a surrogate pair is fine
    assert strict_json_error(b'{"x": "\\ud83d"}') is not None


def test_body_size_limit_answers_413(client: TestClient) -> None:
    big = b'{"model": "' + b"x" * MAX_BODY_BYTES + b'"}'
    for path in POSTS:
        r = client.post(path, content=big, headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text
        assert f"{MAX_BODY_BYTES:,} bytes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it arrives
        yield b'{"model": "'
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b"x" * 1024
        yield b'"}'

    r = client.post("/api/plan", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    ok = client.post("/api/plan", json={"gpus": 16, "model": "resnet50"})
    assert ok.status_code == 200


def test_other_content_types_are_415(client: TestClient) -> None:
    r = client.post("/api/plan", content=b"\xff\xfe", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["detail"]


# --- item 4 (web): a database that is not ours --------------------------------------------


def _foreign(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("kind", ["corrupt", "foreign", "missing folder"])
def test_unreadable_database_is_one_line_503_naming_the_file(tmp_path: Path, kind: str) -> None:
    if kind == "corrupt":
        db = tmp_path / "corrupt.db"
        db.write_bytes(b"this is not SQLite " * 300)
    elif kind == "foreign":
        db = _foreign(tmp_path / "foreign.db")
    else:
        db = tmp_path / "nowhere" / "r.db"
    before = db.read_bytes() if db.exists() else None
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    for path in ("/api/results", "/api/results/1", "/api/results/1/busbw.png"):
        r = client.get(path)
        assert r.status_code == 503, (path, r.text)
        msg = r.json()["detail"]
        assert isinstance(msg, str) and "\n" not in msg and str(db) in msg
    assert (db.read_bytes() if db.exists() else None) == before  # nothing written to it
    assert client.post("/api/plan", json={"model": "resnet50", "gpus": 16}).status_code == 200


# --- item 5: loopback by default, a token for anything else ---------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.org", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_remote_needs_allow_remote_and_then_a_token() -> None:
    with pytest.raises(ConfigError) as err:
        serve_token("0.0.0.0", allow_remote=False, token=None)
    assert err.value.field == "host" and "--allow-remote" in err.value.reason
    generated = serve_token("0.0.0.0", allow_remote=True, token=None)
    assert generated is not None and len(generated) >= 24
    assert serve_token("0.0.0.0", allow_remote=True, token=None) != generated
    assert (
        serve_token("::", allow_remote=True, token="a-long-enough-token") == "a-long-enough-token"
    )
    assert serve_token("127.0.0.1", allow_remote=False, token=None) is None
    with pytest.raises(ConfigError) as err:
        serve_token("127.0.0.1", allow_remote=False, token="short")
    assert err.value.field == "token"


def test_serve_refuses_all_interfaces_without_allow_remote() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "bandwall", "serve", "--host", "0.0.0.0", "--port", "9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: --host:") and "--allow-remote" in r.stderr


def test_token_is_checked_on_every_api_request(tmp_path: Path) -> None:
    token = "t0ken-for-the-test-only"
    seed_db(tmp_path / "t.db")
    client = TestClient(
        create_app(str(tmp_path / "t.db"), token=token), base_url="http://127.0.0.1"
    )
    good = {"Authorization": f"Bearer {token}"}
    for path in ("/api/presets", "/api/schema", "/api/results", "/openapi.json"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get(path, headers=good).status_code == 200, path
    assert client.post("/api/plan", json={"gpus": 16}).status_code == 401
    assert client.post("/api/plan", json={"gpus": 16, "model": "resnet50"}, headers=good).is_success
    assert client.get("/").status_code == 200  # the page itself holds no data
    assert client.get("/static/app.js").status_code == 200


def test_served_with_a_token_over_http(tmp_path: Path) -> None:
    token = "another-token-for-the-test"
    with running_server("--db", str(tmp_path / "s.db"), "--token", token, token=token) as base:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/api/presets", timeout=5)
        assert err.value.code == 401
        err.value.close()
        req = urllib.request.Request(
            base + "/api/presets", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200


def test_the_api_refuses_what_the_cli_refuses(client: TestClient) -> None:
    """Fuzz round 16: 12 ranks on 8-GPU nodes priced over the API (the CLI refuses them), and
    an empty preset list meant every preset (the CLI's --presets '' is a typo)."""
    r = client.post("/api/collective", json={"ranks": 12, "sizes": "1G"})
    assert r.status_code == 422 and ["body", "ranks"] in _locs(r), r.text
    assert client.post("/api/collective", json={"ranks": 16, "sizes": "1G"}).status_code == 200
    r = client.post("/api/compare", json={"presets": [], "plan": {"gpus": 16}})
    assert r.status_code == 422 and ["body", "presets"] in _locs(r), r.text


@pytest.mark.parametrize("field", ["bandwidth_Gbps", "latency_us", "pue", "gpus"])
def test_a_boolean_is_not_a_number_in_any_field(client: TestClient, field: str) -> None:
    """JSON true in bandwidth_Gbps or latency_us was read as 1 at HTTP 200, while pue and gpus
    refused it (fuzz round 20, C5): a checkbox sent to a rate must not price a 1 Gb/s plan."""
    r = client.post("/api/plan", json={"model": "llama3-8b", "gpus": 8, field: True})
    assert r.status_code == 422, r.text
    assert "True is not a number" in r.text or "valid" in r.text, r.text
