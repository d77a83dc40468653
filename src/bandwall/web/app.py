"""FastAPI app: /api/plan, /api/compare, /api/collective, /api/results, /api/schema and the page.

Bad input answers 422 naming the field (Pydantic's own errors, and bandwall's one-line errors
mapped to the field they name), never 500. Before any route sees a request, `RequestGuard`:

- refuses a Host header that is not this machine's loopback name while the server has no
  token (DNS rebinding: a page on evil.example resolving to 127.0.0.1 must not read stored
  runs through the visitor's browser): 421;
- checks the API token (when the server has one): 401;
- refuses query parameters no route takes, and page addresses (`/?gpus=...`) naming
  parameters that are not plan request fields: 422 (a field's value is checked where it is
  used: the page keeps it in the form, the API refuses it next to its field);
- refuses bodies over `MAX_BODY_BYTES` (413) and JSON that Python's parser would accept but
  that is not JSON (NaN, Infinity, 1e999, lone surrogates: 422), so no handler ever holds a
  value it cannot answer with.

Heavy routes (plan, compare, collective, charts) run in a bounded worker pool (`WorkPool`)
with a short queue; when it is full they answer 503 with Retry-After at once, and light
routes (models, presets, results, the page) keep answering within a second under load. A
results database that cannot be read answers 503 with one line naming the file, the home
folder written as ~ (no error shows where a user's files are). /docs is FastAPI's own
Swagger UI (its assets come from the jsDelivr CDN); the schema itself is at /openapi.json.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path as FilePath
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import FastAPI, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bandwall import __version__
from bandwall.errors import BandwallError
from bandwall.planning.request import PlanRequest
from bandwall.report.text import json_safe
from bandwall.web.from_config import FromConfigBody, request_from_files

if TYPE_CHECKING:
    from bandwall.measure.bench.store import Store

#: Largest request body accepted. A full plan request is about 2 KiB of JSON.
MAX_BODY_BYTES = 64 * 1024
#: Longest integer literal parsed (no field takes more than 2**62).
MAX_INT_DIGITS = 40
#: Most message sizes one /api/collective call prices (each is a row of the answer).
MAX_COLLECTIVE_SIZES = 1024
#: Heavy requests computed at once, and how many more may wait for a worker before the
#: server answers 503: two workers keep one core for the light routes on a 2-core machine.
HEAVY_WORKERS = max(1, min(4, (os.cpu_count() or 2) // 2))
HEAVY_QUEUE = 8
#: Seconds a client is told to wait (Retry-After) when the heavy queue is full.
RETRY_AFTER_S = 2
#: Host names a server without a token answers to: this machine's loopback names only.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
#: Query parameters the page (`/`) takes besides the plan request's fields.
PAGE_PARAMS = ("token",)

_T = TypeVar("_T")


def private(text: str) -> str:
    """`text` with the user's home folder written as ~ (web answers never show it)."""
    home = str(FilePath.home())
    return text.replace(home, "~") if home not in ("/", "") else text


class WorkPool:
    """A bounded pool for heavy requests: `workers` run at once, `queue` more wait, the rest
    are refused at once (503 + Retry-After) instead of piling onto the shared thread pool
    that also serves the light routes. Counts are kept on the event loop (no lock needed)."""

    def __init__(self, workers: int = HEAVY_WORKERS, queue: int = HEAVY_QUEUE) -> None:
        import anyio

        self.limiter = anyio.CapacityLimiter(workers)
        self.capacity = workers + queue
        self.pending = 0

    async def run(self, fn: Callable[[], _T]) -> _T:
        import anyio.to_thread

        if self.pending >= self.capacity:
            raise HTTPException(
                status_code=503,
                detail=f"busy: {self.pending} heavy requests running or queued; retry in "
                f"{RETRY_AFTER_S} s",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.pending += 1
        try:
            return await anyio.to_thread.run_sync(fn, limiter=self.limiter)
        finally:
            self.pending -= 1


class PlanBody(PlanRequest):
    """A training job on an infrastructure, and how to run it (the plan request)."""

    # PlanRequest defers building its validator so `bandwall --help` stays fast; a body type
    # FastAPI wraps must be built up front, or pydantic warns about the parameter's alias.
    model_config = ConfigDict(defer_build=False, title="PlanRequest")


class CompareQuery(BaseModel):
    """A plan request and the presets to run it on (default: all)."""

    model_config = ConfigDict(extra="forbid")

    plan: PlanRequest = Field(default_factory=PlanRequest)
    presets: list[Annotated[str, Field(max_length=64)]] | None = Field(default=None, max_length=16)


class CollectiveQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # the defaults `bandwall collective` has, so one empty request gets one answer (fuzz
    # round 23, C5: 64 ranks and 1K:1G:x4 here against 8 and 1K:8G there)
    op: str = Field(default="all_reduce", max_length=32)
    ranks: int = Field(default=8, ge=2, le=1_048_576)
    gpus_per_node: int = Field(default=8, ge=1, le=576)  # as PlanRequest
    fabric: str = Field(default="ib-ndr", max_length=64)
    scale_up: str | None = Field(default=None, max_length=64)
    """Scale-up fabric key (default: the GPU's own), as `collective --scale-up`."""
    gpu: str = Field(default="H100-SXM", max_length=64)
    algo: str = Field(default="auto", max_length=32)
    sizes: str = Field(default="1K:8G", max_length=64)


def _detail(loc: list[str], msg: str, kind: str) -> dict[str, Any]:
    return {"detail": [{"loc": loc, "msg": msg, "type": kind}]}


def _error_response(exc: BandwallError) -> JSONResponse:
    """422 with the field the error names in `loc`, as FastAPI reports its own validation."""
    loc = ["body", exc.field] if exc.field else ["body"]
    return JSONResponse(status_code=422, content=_detail(loc, private(str(exc)), "value_error"))


def _is_json_media(ctype: bytes) -> bool:
    """application/json or a +json type, parameters aside: 'json' anywhere in the header let a
    multipart body whose boundary said json through (fuzz round 23, D1)."""
    media = ctype.split(b";", 1)[0].strip()
    return media == b"application/json" or media.endswith(b"+json")


def _host_allowed(host: str) -> bool:
    """Whether a Host header names this machine's loopback (with or without a port)."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name.split("]", 1)[0] + "]"
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name in LOOPBACK_HOSTS or name.rstrip(".") == "localhost":
        return True
    parts = name.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(p.isascii() and p.isdigit() for p in parts)


def query_error(path: str, query: str) -> dict[str, Any] | None:
    """Why a request's query string is refused (a 422 body naming the parameter), or None.

    No API route takes query parameters; the page takes a plan request's fields (the form
    restores them) and `token`. A value is not judged here: the page keeps `?preset=ai-factory`
    in its form and the plan API refuses it next to the field (never planning something else
    instead), where a person reads the error; an unknown parameter name is refused."""
    if not query or path.startswith("/static/") or path in ("/docs", "/openapi.json"):
        return None
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=False)
    except ValueError:
        return _detail(["query"], "malformed query string", "value_error")
    seen: dict[str, str] = {}
    for key, value in pairs:
        if key in seen:
            return _detail(["query", key], "given twice", "value_error")
        seen[key] = value
    if path != "/":
        key = next(iter(seen), "")
        return _detail(["query", key], "this route takes no query parameters", "extra_forbidden")
    fields = {k: v for k, v in seen.items() if k not in PAGE_PARAMS}
    for key in fields:
        if key not in PlanRequest.model_fields:
            return _detail(
                ["query", key],
                "unknown parameter; the page takes plan request fields (GET /api/schema)",
                "extra_forbidden",
            )
    return None


def strict_json_error(body: bytes) -> str | None:
    """Why `body` is not strict JSON (RFC 8259 in UTF-8), or None when it is.

    Python's parser takes NaN and Infinity, turns 1e999 into inf and keeps lone surrogates
    ("\\ud800"); none of these can be answered in JSON, so they are refused up front.
    """

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"number {text[:24]} is out of range")
        return value

    def integer(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise ValueError(f"integer of {len(text):,} digits is out of range")
        return int(text)

    try:
        doc = json.loads(body, parse_constant=constant, parse_float=finite, parse_int=integer)
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        return "JSON nested too deeply"
    except UnicodeError:
        return "text must be UTF-8 without lone surrogates (e.g. \\ud800)"
    except ValueError as exc:
        return f"invalid JSON: {exc}"
    return None


class RequestGuard:
    """ASGI middleware: API token, body size limit and strict JSON, before any route runs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body_bytes: int,
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = tuple(h.lower() for h in allowed_hosts)

    async def _answer(self, send: Send, status: int, content: Any, **headers: str) -> None:
        body = json.dumps(content).encode()
        raw = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        path = str(scope.get("path", ""))
        if not (path.startswith("/api/") or path == "/openapi.json"):
            return True  # the page and its assets hold no data
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(
            value.strip().encode(), self.token.encode()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: C901
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if self.token is None and not (_host_allowed(host) or host.lower() in self.allowed_hosts):
            await self._answer(
                send,
                421,
                {
                    "detail": f"Host {host[:64]!r} is not this machine's loopback name; open "
                    "the dashboard at http://127.0.0.1:PORT/ (a server bound beyond loopback "
                    "needs --allow-remote and its token)"
                },
            )
            return
        if not self._authorized(scope):
            await self._answer(
                send,
                401,
                {"detail": "this dashboard needs its token: open the URL `bandwall serve` printed"},
                **{"WWW-Authenticate": "Bearer"},
            )
            return
        refused = query_error(
            str(scope.get("path", "")), scope.get("query_string", b"").decode("latin-1")
        )
        if refused is not None:
            await self._answer(send, 422, refused)
            return
        headers = dict(scope.get("headers") or [])
        too_big = {"detail": f"request body over {self.max_body_bytes:,} bytes"}
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            declared = 0
        if declared > self.max_body_bytes:
            await self._answer(send, 413, too_big)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._answer(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        ctype = headers.get(b"content-type", b"").lower()
        if body and ctype and not _is_json_media(ctype):
            await self._answer(send, 415, {"detail": "send JSON (Content-Type: application/json)"})
            return
        if body:
            reason = strict_json_error(body)
            if reason is not None:
                await self._answer(send, 422, _detail(["body"], reason, "json_invalid"))
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class StoreUnavailable(HTTPException):
    """The results database cannot be read: 503 with one line naming the file."""


@contextmanager
def open_store(db: str | None) -> Iterator[Store]:
    """The results store, with any failure to read it as a one-line 503 naming the file."""
    from bandwall.measure.bench.store import Store, default_db_path

    path = db or str(default_db_path())

    def unavailable(reason: str) -> StoreUnavailable:
        line = " ".join(reason.split())
        if path not in line:
            line = f"results database {path!r}: {line}"
        return StoreUnavailable(status_code=503, detail=private(line))

    try:
        store = Store.reader(db)
    except BandwallError as exc:
        raise unavailable(exc.reason) from None
    except (sqlite3.Error, OSError) as exc:
        raise unavailable(str(exc)) from None
    try:
        yield store
    except sqlite3.Error as exc:
        raise unavailable(str(exc)) from None
    except BandwallError as exc:
        if exc.field == "db":
            raise unavailable(exc.reason) from None
        raise
    finally:
        store.close()


def create_app(  # noqa: C901
    db: str | None = None,
    *,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    allowed_hosts: tuple[str, ...] = (),
    pool: WorkPool | None = None,
) -> FastAPI:
    """The dashboard and its API. With `token`, every /api/ call and /openapi.json needs
    ``Authorization: Bearer TOKEN`` (the page reads it from the URL `serve` prints); without
    one, only loopback Host names (and `allowed_hosts`) are answered."""
    app = FastAPI(
        title="bandwall",
        version=__version__,
        docs_url="/docs",
        redoc_url=None,
        description="Plan, compare and inspect the bandwidth wall of distributed "
        "training. Every number carries the assumptions behind it.",
    )
    app.add_middleware(
        RequestGuard, token=token, max_body_bytes=max_body_bytes, allowed_hosts=allowed_hosts
    )
    work = pool or WorkPool()
    busy: dict[int | str, dict[str, Any]] = {
        503: {"description": "Every heavy worker is busy and the queue is full (Retry-After)"}
    }
    static = resources.files("bandwall.web").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.exception_handler(BandwallError)
    async def _bandwall_error(_: Request, exc: BandwallError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's own 422, with non-finite inputs (a JSON 1e999 reads as inf) as null:
        JSON cannot carry them, and the default handler would fail with a 500."""
        from fastapi.encoders import jsonable_encoder

        return JSONResponse(
            status_code=422, content={"detail": json_safe(jsonable_encoder(exc.errors()))}
        )

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        detail = private(exc.detail) if isinstance(exc.detail, str) else exc.detail
        return JSONResponse(
            status_code=exc.status_code, content={"detail": detail}, headers=exc.headers
        )

    def ok(data: Any) -> JSONResponse:
        return JSONResponse(content=json_safe(data))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"))

    @app.get("/api/schema", summary="The plan request's fields, for building a form")
    def api_schema() -> JSONResponse:
        from bandwall.web.form import form_schema

        return ok(form_schema())

    def heavy(fn: Callable[..., JSONResponse | Response]) -> Callable[..., Any]:
        """Run a route's body in the bounded pool (the signature FastAPI reads is kept)."""
        import functools

        @functools.wraps(fn)
        async def route(*args: Any, **kwargs: Any) -> JSONResponse | Response:
            return await work.run(lambda: fn(*args, **kwargs))

        return route

    @app.post("/api/plan", summary="Plan one training job", responses=busy)
    @heavy
    def api_plan(q: PlanBody) -> JSONResponse:
        from bandwall.planning.api import plan

        return ok(plan(q).to_json())

    @app.post(
        "/api/from-config",
        summary="The plan request a framework's own config files describe (upload)",
        responses=busy,
    )
    @heavy
    def api_from_config(q: FromConfigBody) -> JSONResponse:
        return ok(request_from_files(q))

    @app.post("/api/compare", summary="The same job on several presets", responses=busy)
    @heavy
    def api_compare(q: CompareQuery) -> JSONResponse:
        from bandwall.errors import ConfigError
        from bandwall.planning.api import compare
        from bandwall.planning.presets import check_preset_keys, presets

        if q.presets is not None and not q.presets:
            # an empty list is a typo, as the CLI's --presets '' is; leave it out for all
            raise ConfigError(
                "an empty list; give preset keys, or leave it out for all", field="presets"
            )
        if "preset" in q.plan.model_fields_set:
            # compare runs the plan on each of `presets`: one in the plan was dropped unsaid
            raise ConfigError(
                "compare runs the plan on each of presets: give presets, not plan.preset",
                field="preset",
            )
        keys = check_preset_keys(q.presets) if q.presets else list(presets())
        return ok([p.to_json() for p in compare(q.plan, keys)])

    @app.post("/api/collective", summary="The collective cost model over sizes", responses=busy)
    @heavy
    def api_collective(q: CollectiveQuery) -> JSONResponse:
        import numpy as np

        from bandwall.errors import ConfigError
        from bandwall.model.collectives import evaluate_collective, parse_algo, parse_op
        from bandwall.model.collectives.options import check_forced
        from bandwall.model.topology import build_topology, check_whole_nodes
        from bandwall.units import parse_size_range

        sizes = parse_size_range(q.sizes)
        if sizes.size > MAX_COLLECTIVE_SIZES:
            raise ConfigError(
                f"{sizes.size:,} sizes; at most {MAX_COLLECTIVE_SIZES:,} per request",
                field="sizes",
            )
        check_whole_nodes([q.ranks], q.gpus_per_node)  # as the CLI refuses them
        topo = build_topology(
            gpus_per_node=min(q.gpus_per_node, q.ranks),
            scale_out=q.fabric,
            scale_up=q.scale_up,
            gpu=q.gpu,
        )
        op, algo, ranks = parse_op(q.op), parse_algo(q.algo), np.array([float(q.ranks)])
        check_forced(op, algo, ranks, topo, None)  # as the CLI refuses what cannot run
        res = evaluate_collective(op, sizes, np.full(sizes.shape, float(q.ranks)), topo, algo)
        return ok(res.records())

    @app.get("/api/models", summary="Built-in workloads")
    def api_models() -> JSONResponse:
        from bandwall.workloads import builtin_workloads

        return ok(
            [{"key": k, "name": w.name, "params": w.params} for k, w in builtin_workloads().items()]
        )

    @app.get("/api/presets", summary="Infrastructure presets")
    def api_presets() -> JSONResponse:
        from bandwall.planning.presets import presets

        return ok([p.model_dump() for p in presets().values()])

    @app.get("/api/fabrics", summary="Catalog fabrics with sources")
    def api_fabrics() -> JSONResponse:
        from bandwall.catalog import load_catalog

        return ok([f.model_dump(mode="json") for f in load_catalog().fabrics.values()])

    store_errors: dict[int | str, dict[str, Any]] = {
        503: {"description": "The results database cannot be read (one line naming the file)"}
    }
    chart_errors: dict[int | str, dict[str, Any]] = {
        503: {"description": "The database cannot be read, or every heavy worker is busy"}
    }

    @app.get("/api/results", summary="Stored bench runs", responses=store_errors)
    def api_results() -> JSONResponse:
        with open_store(db) as store:
            return ok([r.summary() | {"rows": store.count_rows(r.id)} for r in store.runs()])

    def known(store: Store, run_id: int) -> None:
        if run_id not in {r.id for r in store.runs()}:
            raise HTTPException(status_code=404, detail=f"run {run_id} not found")

    @app.get(
        "/api/results/{run_id}",
        summary="One stored run with its measurements",
        responses=store_errors,
    )
    def api_result(run_id: Annotated[int, Path(ge=1, le=2**62)]) -> JSONResponse:
        with open_store(db) as store:
            known(store, run_id)
            run = store.run(run_id)
            return ok(
                {
                    "run": run.__dict__,
                    "results": store.results(run_id),
                    "links": store.links(run_id),
                    "train": store.train(run_id),
                }
            )

    @app.get(
        "/api/results/{run_id}/busbw.png",
        summary="busbw chart of a stored run",
        response_class=Response,
        responses=chart_errors,
    )
    @heavy
    def api_result_chart(run_id: Annotated[int, Path(ge=1, le=2**62)]) -> Response:
        from bandwall.measure.calibrate import nominal_rate_Gbps
        from bandwall.report import figures, plots

        with open_store(db) as store:
            known(store, run_id)
            run, rows, links = store.run(run_id), store.results(run_id), store.links(run_id)
        if rows:
            fig = figures.busbw_run_figure(run, rows, None, nominal_rate_Gbps(run))
        elif links:
            fig = figures.links_figure(run, links)
        else:
            raise HTTPException(status_code=404, detail=f"run {run_id} has nothing to chart")
        return Response(content=plots.png_bytes(fig), media_type="image/png")

    return app
