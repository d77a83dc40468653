"""Fuzz the web API: schemathesis over the app's own OpenAPI schema (every operation), and
hypothesis over what the schema does not describe: request bodies drawn from the request
model's fields with extreme and wrong-typed values, the page's query string, Host headers.

Invariants: never a 500, never a hang (each call answers within CALL_LIMIT_S), every 422
names where the problem is (`loc`), and no answer shows the user's home folder.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="web tests need the web extra")
schemathesis = pytest.importorskip("schemathesis")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from bandwall.planning.request import PlanRequest  # noqa: E402
from bandwall.web import create_app  # noqa: E402
from tests.fuzz.strategies import EXAMPLES, hostile, json_values, option_values  # noqa: E402
from tests.web.seed import seed_db  # noqa: E402

#: The slowest legitimate call (a searched layout on 2 M GPUs) takes about two seconds here.
CALL_LIMIT_S = 20.0
HOME = str(Path.home())


def _app() -> Any:
    """The app on a seeded database in a folder removed when the test process ends."""
    from tests.fuzz.conftest import SESSION_FOLDERS

    folder = tempfile.mkdtemp(prefix="bandwall-fuzz-")
    SESSION_FOLDERS.append(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    db = Path(folder) / "fuzz.db"
    seed_db(db)
    return create_app(str(db), allowed_hosts=("testserver",))  # the ASGI test client's Host


APP = _app()
CLIENT = TestClient(APP, base_url="http://127.0.0.1")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


def _invariants(response: Any, elapsed: float, what: str) -> None:
    assert response.status_code < 500 or response.status_code == 503, (what, response.text)
    assert elapsed < CALL_LIMIT_S, f"{what} took {elapsed:.1f} s"
    body = response.content.decode("utf-8", errors="replace")
    if HOME not in ("/", ""):
        assert HOME not in body, (what, body[:300])
    if response.status_code == 422:
        detail = response.json()["detail"]
        assert detail and all(isinstance(d.get("loc"), list) and d["loc"] for d in detail)


def test_every_api_route_is_in_the_schema() -> None:
    """So the fuzzing below covers every endpoint: none is hidden from the schema."""
    routes = {
        (m, r.path)
        for r in APP.routes
        if getattr(r, "path", "").startswith("/api/")
        for m in getattr(r, "methods", ())
    }
    fuzzed = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert routes and routes == fuzzed


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_openapi_fuzz_no_500_no_hang_and_422_names_the_place(case: Any) -> None:
    start = time.monotonic()
    response = case.call()
    elapsed = time.monotonic() - start
    case.validate_response(response, checks=[not_a_server_error])
    _invariants(response, elapsed, f"{case.method} {case.path}")


FIELDS = list(PlanRequest.model_fields)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def plan_bodies(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True))
    return {n: draw(json_values(PlanRequest, n)) for n in names}


@FUZZ
@given(body=plan_bodies(), route=st.sampled_from(["/api/plan", "/api/compare"]))
def test_request_bodies_from_the_schema(body: dict[str, Any], route: str) -> None:
    payload = body if route == "/api/plan" else {"plan": body, "presets": ["ai-factory-ib"]}
    start = time.monotonic()
    r = CLIENT.post(route, json=payload)
    _invariants(r, time.monotonic() - start, f"{route} {body}")


@st.composite
def page_queries(draw: st.DrawFn) -> list[tuple[str, str]]:
    names = draw(st.lists(st.sampled_from([*FIELDS, "token", "nope"]), max_size=3))
    out = []
    for n in names:
        value = draw(option_values(PlanRequest, n)) if n in FIELDS else draw(hostile())
        out.append((n, value))
    return out


@FUZZ
@given(
    query=page_queries(),
    path=st.sampled_from(["/", "/api/models", "/api/results", "/api/presets"]),
)
def test_query_strings_are_checked(query: list[tuple[str, str]], path: str) -> None:
    start = time.monotonic()
    r = CLIENT.get(path, params=query)
    _invariants(r, time.monotonic() - start, f"{path}?{query}")
    if path != "/" and query:
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][0] == "query"


@FUZZ
@given(
    host=st.one_of(
        hostile(),
        st.sampled_from(
            [
                "evil.example",
                "127.0.0.1.nip.io",
                "localhost.evil",
                "0.0.0.0",
                "[::2]",
                "127.0.0.1:80@evil",
            ]
        ),
    )
)
def test_foreign_host_headers_are_refused(host: str) -> None:
    """DNS rebinding: only loopback names get an answer from a server without a token."""
    if not (host.isascii() and host.isprintable()):
        return  # not sendable as a header value
    r = CLIENT.get("/api/results", headers={"Host": host})
    loopback = host.strip().lower().split(":")[0] in ("localhost", "127.0.0.1", "testserver")
    assert r.status_code in ((200, 421) if loopback else (421,)), (host, r.status_code)


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil"]
)
def test_dns_rebinding_gets_no_data(host: str) -> None:
    r = CLIENT.get("/api/results", headers={"Host": host})
    assert r.status_code == 421 and "runs" not in r.text
