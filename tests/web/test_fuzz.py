"""Schemathesis over the app's own OpenAPI schema, every operation, a bounded number of
examples each. Invariants: never a 500, never a hang (each call answers within CALL_LIMIT_S),
and every 422 names where the problem is (`loc`)."""

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
from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from bandwall.web import create_app  # noqa: E402
from tests.web.seed import seed_db  # noqa: E402

#: Examples per operation: enough to reach the validators and the engine, small enough that
#: the whole run stays near a minute on two cores.
EXAMPLES = 30
#: The slowest legitimate call (a searched layout on 2 M GPUs) takes about two seconds here.
CALL_LIMIT_S = 20.0


def _app() -> Any:
    """The app on a seeded database in a folder removed when the test process ends."""
    folder = tempfile.mkdtemp(prefix="bandwall-fuzz-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    db = Path(folder) / "fuzz.db"
    seed_db(db)
    return create_app(str(db), allowed_hosts=("testserver",))  # the ASGI test client's Host


APP = _app()
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


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
    assert elapsed < CALL_LIMIT_S, f"{case.method} {case.path} took {elapsed:.1f} s"
    if response.status_code == 422:
        detail = response.json()["detail"]
        assert detail and all(isinstance(d.get("loc"), list) and d["loc"] for d in detail)
