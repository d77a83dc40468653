"""FastAPI app: /api/plan, /api/compare, /api/collective, /api/results and the page.

Bad input answers 422 naming the field (Pydantic's own errors, and bandwall's one-line errors
mapped to the field they name), never 500. Swagger/ReDoc pages are off because they load
assets from a CDN; the schema itself is at /openapi.json.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from bandwall import __version__
from bandwall.errors import BandwallError
from bandwall.planning.request import PlanRequest
from bandwall.report.text import json_safe


class CompareQuery(BaseModel):
    """A plan request and the presets to run it on (default: all)."""

    model_config = ConfigDict(extra="forbid")

    plan: PlanRequest = Field(default_factory=PlanRequest)
    presets: list[Annotated[str, Field(max_length=64)]] | None = Field(default=None, max_length=16)


class CollectiveQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: str = Field(default="all_reduce", max_length=32)
    ranks: int = Field(default=64, ge=2, le=1_048_576)
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    fabric: str = Field(default="ib-ndr", max_length=64)
    algo: str = Field(default="auto", max_length=32)
    sizes: str = Field(default="1K:1G:x4", max_length=64)


def _error_response(exc: BandwallError) -> JSONResponse:
    """422 with the field the error names in `loc`, as FastAPI reports its own validation."""
    loc = ["body", exc.field] if exc.field else ["body"]
    return JSONResponse(
        status_code=422,
        content={"detail": [{"loc": loc, "msg": str(exc), "type": "value_error"}]},
    )


def create_app(db: str | None = None) -> FastAPI:
    app = FastAPI(
        title="bandwall",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        description="Plan, compare and inspect the bandwidth wall of distributed "
        "training. Every number carries the assumptions behind it.",
    )
    static = resources.files("bandwall.web").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.exception_handler(BandwallError)
    async def _bandwall_error(_: Request, exc: BandwallError) -> JSONResponse:
        return _error_response(exc)

    def ok(data: Any) -> JSONResponse:
        return JSONResponse(content=json_safe(data))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"))

    @app.post("/api/plan", summary="Plan one training job")
    def api_plan(q: PlanRequest) -> JSONResponse:
        from bandwall.planning.api import plan

        return ok(plan(q).to_json())

    @app.post("/api/compare", summary="The same job on several presets")
    def api_compare(q: CompareQuery) -> JSONResponse:
        from bandwall.planning.api import compare
        from bandwall.planning.presets import presets

        keys = q.presets or list(presets())
        return ok([p.to_json() for p in compare(q.plan, keys)])

    @app.post("/api/collective", summary="The collective cost model over sizes")
    def api_collective(q: CollectiveQuery) -> JSONResponse:
        import numpy as np

        from bandwall.model.collectives import evaluate_collective, parse_algo, parse_op
        from bandwall.model.topology import build_topology
        from bandwall.units import parse_size_range

        sizes = parse_size_range(q.sizes)
        topo = build_topology(gpus_per_node=min(q.gpus_per_node, q.ranks), scale_out=q.fabric)
        res = evaluate_collective(
            parse_op(q.op), sizes, np.full(sizes.shape, float(q.ranks)), topo, parse_algo(q.algo)
        )
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

    @app.get("/api/results", summary="Stored bench runs")
    def api_results() -> JSONResponse:
        from bandwall.measure.bench.store import Store

        with Store(db) as store:
            return ok([r.summary() | {"rows": store.count_rows(r.id)} for r in store.runs()])

    @app.get("/api/results/{run_id}", summary="One stored run with its measurements")
    def api_result(run_id: Annotated[int, Path(ge=1, le=2**62)]) -> JSONResponse:
        from bandwall.measure.bench.store import Store

        with Store(db) as store:
            if run_id not in {r.id for r in store.runs()}:
                raise HTTPException(status_code=404, detail=f"run {run_id} not found")
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
    )
    def api_result_chart(run_id: Annotated[int, Path(ge=1, le=2**62)]) -> Response:
        from bandwall.measure.bench.store import Store
        from bandwall.report import figures, plots

        with Store(db) as store:
            if run_id not in {r.id for r in store.runs()}:
                raise HTTPException(status_code=404, detail=f"run {run_id} not found")
            run, rows, links = store.run(run_id), store.results(run_id), store.links(run_id)
        if rows:
            fig = figures.busbw_run_figure(run, rows, None, None)
        elif links:
            fig = figures.links_figure(run, links)
        else:
            raise HTTPException(status_code=404, detail=f"run {run_id} has nothing to chart")
        return Response(content=plots.png_bytes(fig), media_type="image/png")

    return app
