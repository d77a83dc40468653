"""Speed targets of issue 24, each printed as a ratio (not asserted; > 1.00x means met):

- `bandwall --help` <= 0.25 s and `bandwall plan` <= 0.5 s wall, also as multiples of
  `python -c pass` (the interpreter's own start);
- `sweep` >= 2,000,000 fully priced plans per second on one core (every layout axis fixed);
- one fixed-layout in-process `plan()` <= 1 ms, split into the engine and what is around it
  (request, cluster and workload resolution, result assembly), and against llm-analysis on
  the same published row (`pip install -e '.[peers]'`; without it that ratio is skipped);
- one in-process `plan()` with the layout searched, on 16,384 GPUs, <= 0.5 s like the command.

Wall times are the best of several runs: on a shared machine other work only ever adds time.

Run: taskset -c 0 python benchmarks/speed.py
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import bandwall.planning.api as api
from _peers import available
from bandwall.model.collectives import fast
from bandwall.planning.request import make_request

TARGET_HELP_S = 0.25
TARGET_PLAN_CMD_S = 0.5
TARGET_PLANS_PER_S = 2_000_000
TARGET_PLAN_S = 1e-3


#: Bytecode as an installed package has it (pip compiles .pyc at install): the warm-up run
#: writes it here, outside the source tree. PYTHONDONTWRITEBYTECODE (set on this project's
#: machines) would recompile every module on every start; that figure is printed beside.
_PYCACHE = tempfile.mkdtemp(prefix="bandwall-bench-pycache-")
atexit.register(shutil.rmtree, _PYCACHE, ignore_errors=True)


def _env(bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def _wall(argv: list[str], repeat: int = 7, bytecode: bool = True) -> tuple[float, float]:
    """Best and median wall time of a command, after one warm-up run (bytecode, page cache)."""
    env = _env(bytecode)
    subprocess.run(argv, capture_output=True, check=True, env=env)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def _best(fn: Callable[[], Any], repeat: int, number: int) -> float:
    """Best per-call seconds over `repeat` batches of `number` calls."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def starts() -> None:
    python, _ = _wall([sys.executable, "-c", "pass"])
    for name, argv, target in (
        ("bandwall --help", ["--help"], TARGET_HELP_S),
        ("bandwall plan", ["plan", "--model", "llama3-8b", "--gpus", "64"], TARGET_PLAN_CMD_S),
    ):
        best, median = _wall([sys.executable, "-m", "bandwall", *argv])
        raw, _ = _wall([sys.executable, "-m", "bandwall", *argv], repeat=3, bytecode=False)
        print(
            f"{name}: {best * 1e3:,.0f} ms best, {median * 1e3:,.0f} ms median = "
            f"{best / python:.1f}x python -c pass ({python * 1e3:.0f} ms); target <= "
            f"{target:g} s, ratio {target / best:.2f}x ({raw * 1e3:,.0f} ms compiling every "
            "module, as with PYTHONDONTWRITEBYTECODE)"
        )


def sweep_rate() -> None:
    req = make_request(
        model="llama3-70b", gpus=1024, preset="ai-factory-ib", ep=1, cp=1, virtual_stages=1
    )
    grid = {
        "gpus": [2**i for i in range(6, 15)],
        "bandwidth_Gbps": list(np.geomspace(1, 800, 100)),
        "tp": [1, 2, 4, 8],
        "pp": [1, 2, 4, 8, 16],
        "zero": [1, 3],
        "micro_batch": [1, 2, 4],
    }
    rows = len(api.sweep(req, {k: v[:2] for k, v in grid.items()})["step_time_s"])
    seconds = _best(lambda: api.sweep(req, grid), repeat=3, number=1)
    rows = len(api.sweep(req, grid)["step_time_s"])
    rate = rows / seconds
    print(
        f"sweep: {rows:,} plans in {seconds:.3f} s = {rate:,.0f} plans/s per core; target "
        f">= {TARGET_PLANS_PER_S:,}/s, ratio {rate / TARGET_PLANS_PER_S:.2f}x"
    )


def one_plan() -> None:
    req = make_request(
        model="llama3-70b",
        gpus=1024,
        preset="ai-factory-ib",
        tp=8,
        pp=4,
        cp=1,
        ep=1,
        zero=1,
        micro_batch=1,
        virtual_stages=1,
    )
    total = _best(lambda: api.plan(req), repeat=5, number=20)
    engine_s: list[float] = []
    real = api.evaluate

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        out = real(*args)
        engine_s.append(time.perf_counter() - start)
        return out

    api.evaluate = timed
    try:
        with_engine = _best(lambda: api.plan(req), repeat=5, number=20)
    finally:
        api.evaluate = real
    engine = min(engine_s)

    def cold() -> None:
        fast.clear()  # the compiled collective tables a previous plan() left
        api.plan(req)

    first = _best(cold, repeat=5, number=5)
    print(
        f"plan() one fixed layout (llama3-70b, 1,024 GPUs, tp8 pp4): {total * 1e3:.2f} ms "
        f"(engine {engine * 1e3:.2f} ms, around it {max(with_engine - engine, 0) * 1e3:.2f} "
        f"ms); target <= {TARGET_PLAN_S * 1e3:g} ms, ratio {TARGET_PLAN_S / total:.2f}x; "
        f"{first * 1e3:.2f} ms for a request no earlier plan() priced"
    )


def searched_plans() -> None:
    """The layout search of one `plan` in-process, on the largest job the README shows."""
    for model in ("llama3-405b", "deepseek-v3"):
        req = make_request(model=model, gpus=16384, preset="ai-factory-ib")
        seconds = _best(lambda req=req: api.plan(req), repeat=3, number=1)
        p = api.plan(req)
        lay = p.layout
        print(
            f"plan() {model} on 16,384 GPUs, layout searched over {p.search.tried:,} "
            f"candidates: {seconds:.3f} s; target <= {TARGET_PLAN_CMD_S:g} s, ratio "
            f"{TARGET_PLAN_CMD_S / seconds:.2f}x (tp={lay['tp']} pp={lay['pp']} cp={lay['cp']} "
            f"ep={lay['ep']} dp={lay['dp']})"
        )


def against_llm_analysis() -> None:
    """bandwall's plan() and llm-analysis's train() on the first published row both run."""
    if not available():
        print("plan() vs llm-analysis: skipped (peer tool not installed)")
        return
    from bandwall.measure.calibrate.published import SOURCES, load_rows, request_for
    from compare_llm_analysis import _llm_analysis

    for name, rows in load_rows(None).items():
        row, stack = rows[0], SOURCES[name]
        req = request_for(row, stack)
        with tempfile.TemporaryDirectory() as tmp:
            theirs = _best(lambda r=row, t=Path(tmp): _llm_analysis(r, None, t), repeat=3, number=5)
        ours = _best(lambda r=req: api.plan(r), repeat=3, number=5)
        print(
            f"plan() vs llm-analysis on {row['id']} ({name}): bandwall {ours * 1e3:.2f} ms, "
            f"llm-analysis {theirs * 1e3:.2f} ms per evaluation; ratio {theirs / ours:.2f}x "
            "(> 1: bandwall faster)"
        )
        return


def main() -> None:
    starts()
    sweep_rate()
    one_plan()
    searched_plans()
    against_llm_analysis()


if __name__ == "__main__":
    main()
