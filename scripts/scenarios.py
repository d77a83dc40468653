"""docs/scenarios.md from its template (scripts/scenarios.md.in): every number in the page is the
output of the command the page shows, run here through the CLI with `--json`.

    python scripts/scenarios.py           # print the page
    python scripts/scenarios.py --write   # regenerate docs/scenarios.md

tests/test_docs_scenarios.py checks that the page is what this script writes, so a model change
that moves a number fails until the page is regenerated (and its prose re-read).

Placeholders: `{{name}}` is a value from `values()`; `{{table:name}}` a table from `tables()`.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "scripts" / "scenarios.md.in"
PAGE = ROOT / "docs" / "scenarios.md"

Row = dict[str, Any]


@cache
def cli(cmd: str) -> Any:
    """The `--json` output of a `bandwall ...` command line, run in-process."""
    from typer.testing import CliRunner

    from bandwall.cli.root import app

    args = shlex.split(cmd)
    assert args[0] == "bandwall", cmd
    res = CliRunner().invoke(app, [*args[1:], "--json"])
    if res.exit_code != 0:
        raise RuntimeError(f"{cmd}: exit {res.exit_code}: {res.output[-400:]}")
    return json.loads(res.stdout)


# --- formatting -----------------------------------------------------------------------------


def sec(s: float) -> str:
    """A duration as the page writes it: ms below 1 s, 3 significant figures."""
    if s == 0:
        return "0"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 100:
        return f"{s:.3g} s"
    return f"{s:,.0f} s"


def dur(s: float) -> str:
    """A time to train: min, h or d."""
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.2f} h"
    return f"{s / 86400:.3g} d"


def pct(x: float, digits: int = 1) -> str:
    return f"{x * 100:.{digits}f}%"


def usd(x: float) -> str:
    if x >= 1e6:
        return f"${x / 1e6:.2f}M"
    if x >= 100:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


def kwh(x: float) -> str:
    return f"{x / 1e3:,.1f} MWh" if x >= 1e3 else f"{x:,.3g} kWh"


def ratio(x: float) -> str:
    return f"{x:.1f}×" if x < 100 else f"{x:,.0f}×"


def layout(p: Row) -> str:
    """The layout axes that are not 1 (dp always), e.g. 'pp2 dp4', 'cp2 dp64', 'dp32 z1'."""
    parts = [f"{k}{p[k]}" for k in ("tp", "pp", "cp", "ep") if p[k] > 1 and k != "tp"]
    return " ".join([*parts, f"dp{p['dp']}"])


def table(headers: list[str], align: str, rows: list[list[str]]) -> str:
    sep = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --- scenario 1 -----------------------------------------------------------------------------

S1_BASE = (
    "bandwall plan --model resnet50 --gpus 16 --preset decentralized-colocated "
    "--bandwidth 15Gbps --jitter 200us"
)
S1_ROWS = {
    "15 Gb/s": S1_BASE,
    "no overlap": S1_BASE + " --no-overlap",
    "IB NDR": "bandwall plan --model resnet50 --gpus 16 --preset ai-factory-ib",
    "Spectrum-X": "bandwall plan --model resnet50 --gpus 16 --preset ai-factory-spectrum-x "
    "--fabric spectrum-x-800",
}

S1_LLAMA = (
    "bandwall plan --model llama3-8b --gpus 64 --tp 8 --preset decentralized-colocated "
    "--bandwidth 12Gbps --jitter 500us"
)
S1_STRATEGIES = {
    "synchronous": "",
    "4× batch (`--global-batch 2048`)": "--global-batch 2048",
    "int8 gradients (`--compression int8`)": "--compression int8",
    "top-1% (`--compression topk:0.01`)": "--compression topk:0.01",
    "DiLoCo H=100, fp32 (`--local-sgd-steps 100`)": "--local-sgd-steps 100",
    "DiLoCo H=500 (`--local-sgd-steps 500`)": "--local-sgd-steps 500",
    "H=100, `--outer-compression int4`": "--local-sgd-steps 100 --outer-compression int4",
    "same + `--outer-overlap` (streaming)": "--local-sgd-steps 100 --outer-compression int4 "
    "--outer-overlap",
    "H=100, `--diloco-workers 2`": "--local-sgd-steps 100 --diloco-workers 2",
}
S1_LLAMA_IB = "bandwall plan --model llama3-8b --gpus 64 --tp 8 --preset ai-factory-ib"


def s1_strategy(label: str) -> Row:
    extra = S1_STRATEGIES[label]
    return cli(f"{S1_LLAMA} {extra}".strip())


def exposed_dp(p: Row) -> float:
    return float(p["dp_s"] + p["outer_sync_s"])


# --- scenario 2 -----------------------------------------------------------------------------

S2_BASE = (
    "bandwall plan --model llama3-405b --gpus 16384 --tp 8 --pp 16 --global-batch 2048 "
    "--preset ai-factory-spectrum-x"
)
S2_ROWS = {
    "none (non-blocking, adaptive routing)": "",
    "`--oversubscription 2`": "--oversubscription 2",
    "`--oversubscription 4`": "--oversubscription 4",
    "`--straggler-fraction 0.001 --straggler-slowdown 0.1`": "--straggler-fraction 0.001 "
    "--straggler-slowdown 0.1",
    "`--routing static`": "--routing static",
    "`--failed-links 1 --routing adaptive`": "--failed-links 1 --routing adaptive",
    "`--failed-links 1 --routing static`": "--failed-links 1 --routing static",
    "`--failed-link-fraction 0.01 --routing adaptive`": "--failed-link-fraction 0.01 "
    "--routing adaptive",
    "`--failed-link-fraction 0.01 --routing static`": "--failed-link-fraction 0.01 "
    "--routing static",
    "`--failed-link-fraction 0.1 --routing adaptive`": "--failed-link-fraction 0.1 "
    "--routing adaptive",
    "`--failed-link-fraction 0.1 --routing static`": "--failed-link-fraction 0.1 --routing static",
}


def s2(label: str) -> Row:
    return cli(f"{S2_BASE} {S2_ROWS[label]}".strip())


ETH_PRESETS = "ai-factory-ib,ai-factory-spectrum-x,ai-factory-roce"
ETH_VARIANTS = {
    "IB NDR": ("", 0),
    "Spectrum-X": ("", 1),
    "RoCE, NCCL defaults": ("", 2),
    "RoCE, 16 QPs": (" --qps-per-connection 16", 2),
    "RoCE, packed": (" --placement packed", 2),
}


def eth(gpus: int, variant: str) -> Row:
    extra, i = ETH_VARIANTS[variant]
    cmd = (
        f"bandwall compare --model llama3-70b --gpus {gpus} --global-batch 2048 --tokens 1T "
        f"--presets {ETH_PRESETS}{extra}"
    )
    return cli(cmd)[i]


# --- scenario 3 -----------------------------------------------------------------------------

S3_COMPARE = "bandwall compare --model llama3-8b --gpus 256 --tp 8 --tokens 1T"


def s3() -> dict[str, Row]:
    return {p["cluster"]["preset"]: p for p in cli(S3_COMPARE)}


# --- serving ----------------------------------------------------------------------------------


def serving(model: str) -> list[Row]:
    return list(cli(f"bandwall compare --infer --model {model} --gpus 8"))


SERVE_4090 = (
    "bandwall infer --model llama3-70b --preset decentralized-geo --gpu RTX-4090 "
    "--gpus-per-node 1 --gpus 8 --spread-sites"
)


# --- break-even bandwidth ------------------------------------------------------------------

#: The NIC rates tried: 1 Gb/s × 1.05^k up to 800 Gb/s (the page's grid).
RATES_GBPS = [1.05**k for k in range(200) if 1.05**k <= 800.0 + 1e-9]
BE_JOBS = {
    "Llama 3 8B, 256": "--model llama3-8b --gpus 256 --tp 8 --tokens 1T",
    "Llama 3 70B, 512": "--model llama3-70b --gpus 512 --tp 8 --pp 4 --tokens 1T",
    "ResNet-50, 64, bs 1,024": "--model resnet50 --gpus 64",
    "ResNet-50, 64, bs 4,096": "--model resnet50 --gpus 64 --global-batch 4096",
}


def be_refs(job: str) -> tuple[float, float]:
    """(hyperscaler, AI factory) cost of the job, from `bandwall compare`."""
    rows = {p["cluster"]["preset"]: p for p in cli(f"bandwall compare {BE_JOBS[job]}")}
    return rows["hyperscaler-vm"]["cost_usd"], rows["ai-factory-ib"]["cost_usd"]


def be_cost(job: str, preset: str, h: int, k: int) -> float:
    rate = f"{RATES_GBPS[k]:.6g}Gbps"
    extra = f" --local-sgd-steps {h}" if h > 1 else ""
    return float(
        cli(f"bandwall plan {BE_JOBS[job]} --preset {preset} --bandwidth {rate}{extra}")["cost_usd"]
    )


def break_even(job: str, preset: str, h: int, ref: float) -> float | None:
    """The lowest rate of the grid from which the run costs no more than `ref` (bisection: cost
    falls as the rate grows), or None when even 800 Gb/s does not get there."""
    top = len(RATES_GBPS) - 1
    if be_cost(job, preset, h, top) > ref:
        return None
    lo, hi = -1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if be_cost(job, preset, h, mid) <= ref:
            hi = mid
        else:
            lo = mid
    return RATES_GBPS[hi]


@cache
def be_data() -> dict[str, dict[str, Any]]:
    """Per job: the two reference costs, and the break-even rates of the co-located preset
    (sync and DiLoCo, against each reference) and of geo (against the hyperscaler)."""
    out: dict[str, dict[str, Any]] = {}
    top = len(RATES_GBPS) - 1
    for job in BE_JOBS:
        hyper, factory = be_refs(job)
        row: dict[str, Any] = {"hyper": hyper, "factory": factory}
        for h in (1, 100):
            row[f"co{h}"] = (
                break_even(job, "decentralized-colocated", h, hyper),
                break_even(job, "decentralized-colocated", h, factory),
            )
            row[f"geo{h}"] = (
                break_even(job, "decentralized-geo", h, hyper),
                be_cost(job, "decentralized-geo", h, top),
            )
        out[job] = row
    return out


def rate_range(rates: list[float | None]) -> str:
    found = sorted(r for r in rates if r is not None)
    if not found:
        return "never"
    lo, hi = gbps(found[0]), gbps(found[-1])
    return f"{lo} Gb/s" if lo == hi else f"{lo}-{hi} Gb/s"


def gbps(x: float | None) -> str:
    if x is None:
        return "never"
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


# --- the values and tables the template names --------------------------------------------


def tables() -> dict[str, str]:
    out: dict[str, str] = {}
    rows = []
    for label, cmd in S1_ROWS.items():
        p = cli(cmd)
        rows.append(
            [
                label,
                sec(p["step_time_s"]),
                sec(p["compute_s"]),
                sec(p["exposed_comm_s"]),
                f"**{pct(p['comm_efficiency'])}**",
                pct(p["mfu"]),
                dur(p["time_to_train_s"]),
                f"{p['gpu_hours']:,.1f}" if p["gpu_hours"] < 10 else f"{p['gpu_hours']:,.0f}",
                usd(p["cost_usd"]),
                kwh(p["energy_kwh"]),
            ]
        )
    out["s1"] = table(
        ["", "step", "compute", "exposed", "eff.", "MFU", "90 epochs", "GPU-h", "cost", "energy"],
        "lrrrrrrrrr",
        rows,
    )

    def strategy_row(label: str, p: Row) -> list[str]:
        return [
            label,
            layout(p),
            sec(p["step_time_s"]),
            sec(exposed_dp(p)),
            pct(p["comm_efficiency"], 0),
            pct(p["mfu"]),
            usd(p["cost_usd"]),
        ]

    rows = [strategy_row(label, s1_strategy(label)) for label in S1_STRATEGIES]
    rows.append(strategy_row("AI factory (second command)", cli(S1_LLAMA_IB)))
    out["s1_strategies"] = table(
        [
            "strategy (extra flags)",
            "layout",
            "step",
            "DP/outer exposed",
            "comm eff.",
            "MFU",
            "cost",
        ],
        "llrrrrr",
        rows,
    )
    rows = []
    names = {
        "ai-factory-ib": "ai-factory-*",
        "hyperscaler-vm": "hyperscaler",
        "decentralized-colocated": "co-located",
        "decentralized-geo": "geo",
    }
    for model, title in (("llama3-8b", "Llama 3 8B"), ("llama3-70b", "Llama 3 70B")):
        first = True
        for r in serving(model):
            preset = r["cluster"]["preset"]
            if preset not in names:
                continue  # the three AI-factory presets serve alike (one row)
            cheap = preset.startswith("decentralized")
            rows.append(
                [
                    title if first else "",
                    names[preset],
                    f"{r['tp']:.0f}×{r['pp']:.0f}/{r['batch']:.0f}",
                    sec(r["ttft_s"]),
                    sec(r["itl_s"]),
                    f"{r['tokens_per_s_per_gpu']:,.0f}",
                    ("**" if cheap else "")
                    + usd(r["cost_per_million_tokens_usd"])
                    + ("**" if cheap else ""),
                    f"{r['joules_per_token']:.2f}",
                    f"{r['co2_g_per_million_tokens']:,.0f}",
                ]
            )
            first = False
    r = cli(SERVE_4090)
    rows.append(
        [
            "70B, 8 × RTX 4090",
            "geo, 8 sites",
            f"{r['tp']:.0f}×{r['pp']:.0f}/{r['batch']:.0f}",
            sec(r["ttft_s"]),
            sec(r["itl_s"]),
            f"{r['tokens_per_s_per_gpu']:,.0f}",
            usd(r["cost_per_million_tokens_usd"]),
            f"{r['joules_per_token']:.2f}",
            f"{r['co2_g_per_million_tokens']:,.0f}",
        ]
    )
    out["serving"] = table(
        [
            "model",
            "preset",
            "tp×pp/batch",
            "TTFT",
            "ITL",
            "tok/s/GPU",
            "$/M tok",
            "J/tok",
            "gCO2/M",
        ],
        "lllrrrrrr",
        rows,
    )
    rows = []
    for label in S2_ROWS:
        p = s2(label)
        rows.append(
            [
                label,
                layout(p),
                sec(p["step_time_s"]),
                sec(p["dp_s"]),
                pct(p["comm_efficiency"]),
                pct(p["mfu"]),
            ]
        )
    out["s2"] = table(
        ["Spectrum-X, extra flags", "layout", "step", "DP exposed", "eff.", "MFU"], "llrrrr", rows
    )
    rows = []
    for g in (1024, 8192, 32768):
        ib = eth(g, "IB NDR")
        for i, v in enumerate(ETH_VARIANTS):
            p = eth(g, v)
            rows.append(
                [
                    f"{g:,}" if i == 0 else "",
                    v,
                    pct(p["mfu"]),
                    pct(p["tokens_per_s"] / ib["tokens_per_s"]),
                    sec(p["step_time_s"]),
                    dur(p["time_to_train_s"]),
                    usd(p["cost_usd"]),
                ]
            )
    out["ethernet"] = table(
        ["GPUs", "fabric", "MFU", "throughput vs IB", "step", "to train", "cost"],
        "rlrrrrr",
        rows,
    )
    rows = []
    for preset, p in s3().items():
        rows.append(
            [
                preset,
                layout(p) + f" z{p['zero']}",
                sec(p["step_time_s"]),
                pct(p["comm_efficiency"]),
                dur(p["time_to_train_s"]),
                f"${p['price_per_gpu_hour_usd']:.2f}",
                usd(p["egress_usd"]) if p["egress_usd"] else "$0",
                usd(p["cost_usd"]),
                kwh(p["energy_kwh"]),
            ]
        )
    out["s3"] = table(
        [
            "preset",
            "layout",
            "step",
            "comm eff.",
            "to train",
            "$/GPU-h",
            "egress",
            "cost",
            "energy",
        ],
        "llrrrrrrr",
        rows,
    )
    rows = []
    for job, row in be_data().items():
        cells = [job, f"{usd(row['hyper'])} / {usd(row['factory'])}"]
        for h in (1, 100):
            a, b = row[f"co{h}"]
            cells.append(f"{gbps(a)} / {gbps(b)}" + (" Gb/s" if a or b else ""))
        geo = []
        for h in (1, 100):
            g, at_top = row[f"geo{h}"]
            geo.append(f"{gbps(g)} Gb/s" if g else f"never ({usd(at_top)} at 800 Gb/s)")
        cells.append(" / ".join(geo))
        rows.append(cells)
    out["break_even"] = table(
        [
            "job, GPUs",
            "hyperscaler / AI factory",
            "co-located sync",
            "co-located DiLoCo H=100",
            "geo sync / DiLoCo",
        ],
        "lrrrl",
        rows,
    )
    return out


def ecmp_values(prefix: str, p: Row) -> dict[str, str]:
    """The hashed-fabric figures `--json` reports (`cluster.fabric_congestion`), as printed."""
    fc = p["cluster"]["fabric_congestion"]
    return {
        f"{prefix}_flows": f"{fc['ecmp_flows_per_leaf']:.0f}",
        f"{prefix}_paths": f"{fc['ecmp_paths_per_leaf']:.0f}",
        f"{prefix}_mean": f"{fc['ecmp_mean_load']:.1f}",
        f"{prefix}_links": f"{fc['ecmp_links']:,.0f}",
        f"{prefix}_max": f"{fc['ecmp_expected_max_load']:.1f}",
        f"{prefix}_p99": f"{fc['ecmp_p99_max_load']:.0f}",
        f"{prefix}_collision": f"{fc['collision_factor']:.2f}",
    }


def values() -> dict[str, str]:
    v: dict[str, str] = {}
    slow, noov, ib = (cli(S1_ROWS[k]) for k in ("15 Gb/s", "no overlap", "IB NDR"))
    v["s1_eff"] = f"{slow['comm_efficiency']:.3f}"
    v["s1_eff_noov"] = f"{noov['comm_efficiency']:.3f}"
    v["s1_eff_ib"] = f"{ib['comm_efficiency']:.2f}"
    v["s1_dp"] = sec(noov["exposed_comm_s"])
    v["s1_dp_x_compute"] = f"{noov['exposed_comm_s'] / noov['compute_s']:.0f}"
    v["s1_ttt"] = dur(slow["time_to_train_s"])
    v["s1_ttt_ib"] = dur(ib["time_to_train_s"])
    v["s1_ttt_ratio"] = ratio(slow["time_to_train_s"] / ib["time_to_train_s"])
    v["s1_ttt_ratio_noov"] = ratio(noov["time_to_train_s"] / ib["time_to_train_s"])
    v["s1_gpuh"] = f"{slow['gpu_hours']:,.0f}"
    v["s1_gpuh_ib"] = f"{ib['gpu_hours']:,.1f}"
    v["s1_gpuh_ratio"] = ratio(slow["gpu_hours"] / ib["gpu_hours"])
    v["s1_cost"], v["s1_cost_ib"] = usd(slow["cost_usd"]), usd(ib["cost_usd"])
    v["s1_cost_ratio"] = ratio(slow["cost_usd"] / ib["cost_usd"])
    v["s1_energy_ratio"] = ratio(slow["energy_kwh"] / ib["energy_kwh"])
    v["s1_price"] = f"${slow['price_per_gpu_hour_usd']:.2f}"
    v["s1_price_ib"] = f"${ib['price_per_gpu_hour_usd']:.2f}"

    sync = s1_strategy("synchronous")
    int8 = s1_strategy("int8 gradients (`--compression int8`)")
    topk = s1_strategy("top-1% (`--compression topk:0.01`)")
    stream = s1_strategy("same + `--outer-overlap` (streaming)")
    two = s1_strategy("H=100, `--diloco-workers 2`")
    fac = cli(S1_LLAMA_IB)
    v["s1_stream_cost"], v["s1_fac_cost"] = usd(stream["cost_usd"]), usd(fac["cost_usd"])
    v["s1_stream_step"], v["s1_fac_step"] = sec(stream["step_time_s"]), sec(fac["step_time_s"])
    v["s1_stream_eff"] = pct(stream["comm_efficiency"], 0)
    v["s1_two_eff"] = pct(two["comm_efficiency"], 0)
    v["s1_sync_dp"], v["s1_int8_dp"] = sec(exposed_dp(sync)), sec(exposed_dp(int8))
    v["s1_topk_eff"] = pct(topk["comm_efficiency"], 0)
    for n in (1024, 4096, 16384):
        p = cli(
            "bandwall plan --model resnet50 --gpus 16 --preset decentralized-colocated "
            f"--bandwidth 12Gbps --jitter 500us --global-batch {n}"
        )
        v[f"r50_eff_{n}"] = pct(p["comm_efficiency"], 0 if p["comm_efficiency"] >= 0.1 else 1)
    sites = {
        p["cluster"]["preset"]: p
        for p in cli(
            "bandwall compare --model llama3-70b --gpus 32 --tp 8 --pp 4 "
            "--presets ai-factory-ib,decentralized-colocated,decentralized-geo"
        )
    }
    geo, fib = sites["decentralized-geo"], sites["ai-factory-ib"]
    v["pp_geo_step"], v["pp_ib_step"] = sec(geo["step_time_s"]), sec(fib["step_time_s"])
    v["pp_geo_thr"] = pct(geo["tokens_per_s"] / fib["tokens_per_s"], 0)
    v["pp_geo_mfu"], v["pp_ib_mfu"] = pct(geo["mfu"]), pct(fib["mfu"])
    v["pp_geo_mb"] = f"{geo['micro_batches']:,}"
    v["pp_geo_egress"] = usd(geo["egress_usd"])
    v["pp_geo_tokens"] = f"{geo['tokens'] / 1e12:.1f} T"
    v["pp_geo_cost"], v["pp_ib_cost"] = usd(geo["cost_usd"]), usd(fib["cost_usd"])
    dp_geo = cli(
        "bandwall plan --model llama3-70b --gpus 512 --tp 8 --pp 4 --preset decentralized-geo"
    )
    dl_geo = cli(
        "bandwall plan --model llama3-70b --gpus 512 --tp 8 --pp 4 --preset decentralized-geo "
        "--local-sgd-steps 100"
    )
    v["geo_dp_step"], v["geo_dp_eff"] = sec(dp_geo["step_time_s"]), pct(dp_geo["comm_efficiency"])
    v["geo_dp_mfu"] = pct(dp_geo["mfu"])
    v["geo_dl_step"], v["geo_dl_eff"] = sec(dl_geo["step_time_s"]), pct(dl_geo["comm_efficiency"])
    v["geo_dl_layout"] = layout(dl_geo)

    serve = {
        m: {r["cluster"]["preset"]: r for r in serving(m)} for m in ("llama3-8b", "llama3-70b")
    }
    for m, tag in (("llama3-8b", "8b"), ("llama3-70b", "70b")):
        r = serve[m]
        co, hy, fa = r["decentralized-colocated"], r["hyperscaler-vm"], r["ai-factory-ib"]
        c = "cost_per_million_tokens_usd"
        v[f"srv_{tag}_vs_factory"] = pct(1 - co[c] / fa[c], 0)
        v[f"srv_{tag}_vs_hyper"] = pct(1 - co[c] / hy[c], 0)
        v[f"srv_{tag}_hyper_slower"] = pct(
            fa["tokens_per_s_per_gpu"] / hy["tokens_per_s_per_gpu"] - 1, 0
        )
        geo = r["decentralized-geo"]
        v[f"srv_{tag}_energy_more"] = (
            pct(co["joules_per_token"] / fa["joules_per_token"] - 1, 0)
            + "-"
            + pct(geo["joules_per_token"] / fa["joules_per_token"] - 1, 0)
        )
        v[f"srv_{tag}_co2_ratio"] = ratio(
            geo["co2_g_per_million_tokens"] / fa["co2_g_per_million_tokens"]
        )
        v[f"srv_{tag}_in"] = f"{fa['prompt_tokens']:,.0f}"
        v[f"srv_{tag}_out"] = f"{fa['output_tokens']:,.0f}"
    v["srv_pue_co"] = f"{serve['llama3-8b']['decentralized-colocated']['pue']:g}"
    v["srv_pue_geo"] = f"{serve['llama3-8b']['decentralized-geo']['pue']:g}"
    v["srv_pue_fa"] = f"{serve['llama3-8b']['ai-factory-ib']['pue']:g}"
    v["srv_grid_geo"] = f"{serve['llama3-8b']['decentralized-geo']['g_co2_per_kWh']:g}"
    v["srv_grid_fa"] = f"{serve['llama3-8b']['ai-factory-ib']['g_co2_per_kWh']:g}"
    r4090 = cli(SERVE_4090)
    v["r4090_pp"] = f"{r4090['pp']:.0f}"
    v["r4090_hop"] = sec(r4090["hop_s"] * r4090["hops"])
    v["r4090_hop1"] = sec(r4090["hop_s"])
    v["r4090_hops"] = f"{r4090['hops']:.0f}"
    v["r4090_itl"] = sec(r4090["itl_s"])
    v["r4090_cost"] = usd(r4090["cost_per_million_tokens_usd"])
    co70 = serve["llama3-70b"]["decentralized-colocated"]["cost_per_million_tokens_usd"]
    v["r4090_cost_ratio"] = ratio(r4090["cost_per_million_tokens_usd"] / co70)

    base = s2("none (non-blocking, adaptive routing)")
    o2, o4 = s2("`--oversubscription 2`"), s2("`--oversubscription 4`")
    strag = s2("`--straggler-fraction 0.001 --straggler-slowdown 0.1`")
    static = s2("`--routing static`")
    f10a = s2("`--failed-link-fraction 0.1 --routing adaptive`")
    f10s = s2("`--failed-link-fraction 0.1 --routing static`")
    f1s = s2("`--failed-links 1 --routing static`")
    f01a = s2("`--failed-link-fraction 0.01 --routing adaptive`")
    b = base["step_time_s"]
    v["s2_o2"] = pct(o2["step_time_s"] / b - 1, 0)
    v["s2_o4"] = pct(o4["step_time_s"] / b - 1, 0)
    v["s2_o2_mfu"] = pct(o2["mfu"])
    v["s2_strag"] = sec(strag["step_time_s"] - b)
    v["s2_static"] = pct(static["step_time_s"] / b - 1, 0)
    v |= ecmp_values("s2", static)
    v["s2_f1s"] = pct(f1s["step_time_s"] / static["step_time_s"] - 1, 1)
    v["s2_f10s"] = pct(f10s["step_time_s"] / static["step_time_s"] - 1, 0)
    v["s2_f01a"] = pct(f01a["step_time_s"] / b - 1, 1)
    v["s2_f10a"] = pct(f10a["step_time_s"] / b - 1, 1)
    v["s2_mtbf"] = f"{base['mtbf_s'] / 3600:.1f} h"
    v["s2_goodput"] = pct(base["goodput"])

    share = {
        g: eth(g, "RoCE, NCCL defaults")["tokens_per_s"] / eth(g, "IB NDR")["tokens_per_s"]
        for g in (1024, 8192, 32768)
    }
    v["eth_1k"], v["eth_8k"], v["eth_32k"] = (pct(share[g], 0) for g in (1024, 8192, 32768))
    ib8 = eth(8192, "IB NDR")["tokens_per_s"]
    v["eth_8k_qp"] = pct(eth(8192, "RoCE, 16 QPs")["tokens_per_s"] / ib8, 1)
    v["eth_8k_packed"] = pct(eth(8192, "RoCE, packed")["tokens_per_s"] / ib8, 1)
    sx = [
        eth(g, "Spectrum-X")["tokens_per_s"] / eth(g, "IB NDR")["tokens_per_s"]
        for g in (1024, 8192, 32768)
    ]
    v["eth_sx_gap"] = pct(1 - min(sx), 1)
    v["eth_ib_mfu_1k"] = pct(eth(1024, "IB NDR")["mfu"])
    v["eth_ib_mfu_32k"] = pct(eth(32768, "IB NDR")["mfu"])
    v |= ecmp_values("eth8", eth(8192, "RoCE, NCCL defaults"))
    v["eth8_collision_qp"] = ecmp_values("q", eth(8192, "RoCE, 16 QPs"))["q_collision"]

    s3r = s3()
    fa, hy = s3r["ai-factory-ib"], s3r["hyperscaler-vm"]
    co, geo = s3r["decentralized-colocated"], s3r["decentralized-geo"]
    v["s3_virt"] = pct(hy["time_to_train_s"] / fa["time_to_train_s"] - 1, 1)
    v["s3_ttt_fa"], v["s3_ttt_hy"] = dur(fa["time_to_train_s"]), dur(hy["time_to_train_s"])
    v["s3_premium"] = pct(hy["price_per_gpu_hour_usd"] / fa["price_per_gpu_hour_usd"] - 1, 0)
    v["s3_co_vs_hy"] = ratio(co["cost_usd"] / hy["cost_usd"])
    v["s3_geo_vs_hy"] = ratio(geo["cost_usd"] / hy["cost_usd"])
    v["s3_idle"] = pct(1 - co["comm_efficiency"], 0)
    v["s3_geo_time"] = ratio(geo["time_to_train_s"] / co["time_to_train_s"])
    v["s3_geo_cost"] = ratio(geo["cost_usd"] / co["cost_usd"])
    v["s3_geo_egress"] = usd(geo["egress_usd"])
    v["s3_cheaper"] = pct(1 - co["price_per_gpu_hour_usd"] / hy["price_per_gpu_hour_usd"], 0)
    be = be_data()
    v["be_sync_hyper"] = rate_range([r["co1"][0] for r in be.values()])
    v["be_sync_factory"] = rate_range([r["co1"][1] for r in be.values()])
    never = [j for j, r in be.items() if r["co1"][0] is None]
    v["be_sync_never"] = (
        f"; never for: {', '.join(never)} (a few ms of compute per step: latency-bound)"
        if never
        else ""
    )
    v["be_dl_hyper"] = rate_range([r["co100"][0] for r in be.values()])
    v["be_dl_factory"] = rate_range([r["co100"][1] for r in be.values()])
    v["be_geo"] = "; ".join(
        f"{j}: {'sync ' + gbps(r['geo1'][0]) + ' Gb/s' if r['geo1'][0] else 'sync never'}, "
        f"{'DiLoCo ' + gbps(r['geo100'][0]) + ' Gb/s' if r['geo100'][0] else 'DiLoCo never'}"
        for j, r in be.items()
    )
    for job, tag in (("Llama 3 8B, 256", "8b"), ("Llama 3 70B, 512", "70b")):
        p = cli(
            f"bandwall plan {BE_JOBS[job]} --preset decentralized-colocated --local-sgd-steps 100"
        )
        v[f"dl_{tag}_cost"] = usd(p["cost_usd"])
        v[f"dl_{tag}_hyper"] = usd(be_refs(job)[0])
    return v


def render() -> str:
    tabs, vals = tables(), values()

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key.startswith("table:"):
            return tabs[key[6:]]
        return vals[key]

    return re.sub(r"\{\{([\w:]+)\}\}", sub, TEMPLATE.read_text())


def main() -> None:
    page = render()
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)


if __name__ == "__main__":
    main()
