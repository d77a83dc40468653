"""nccl-tests' text output, line for line, so logs from `bench collectives` feed the parsers
people already run on nccl-tests logs (and `bandwall import nccl-tests` reads both back).

Format learned from NVIDIA/nccl-tests src/common.cu (v2.13-2.16, the layout most published
logs have): a `# nThread ...` preamble, `# Using devices` lines, a three-line header, one row
per size with out-of-place then in-place columns, and the `# Out of bounds values` /
`# Avg bus bandwidth` footer. Differences, said in comment lines parsers skip: bandwall's
time column is the median over iterations of the slowest rank (nccl-tests prints the mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bandwall.model.collectives import Op

#: bandwall dtype -> nccl-tests type name (src/common.cu test_typenames).
NCCL_TYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "bfloat16": "bfloat16",
    "int32": "int32",
}
#: The reduction each nccl-tests binary prints in the redop column ("none" for data movement).
REDOP = {
    Op.ALL_REDUCE: "sum",
    Op.REDUCE_SCATTER: "sum",
    Op.REDUCE: "sum",
    Op.SEND_RECV: "sum",
    Op.ALL_GATHER: "none",
    Op.BROADCAST: "none",
    Op.ALL_TO_ALL: "none",
}
ROOT = {Op.BROADCAST: 0, Op.REDUCE: 0}
PERF_BINARY = {
    Op.ALL_REDUCE: "all_reduce_perf",
    Op.ALL_GATHER: "all_gather_perf",
    Op.REDUCE_SCATTER: "reduce_scatter_perf",
    Op.BROADCAST: "broadcast_perf",
    Op.REDUCE: "reduce_perf",
    Op.ALL_TO_ALL: "alltoall_perf",
    Op.SEND_RECV: "sendrecv_perf",
}
HEADER = (
    "#\n"
    f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place"
    "                       in-place          \n"
    f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  "
    f"{'algbw':>6}  {'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} "
    f"{'#wrong':>6}\n"
    f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  "
    f"{'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
    f"{'':>5}"
)


def param_count(op: Op, count: int, world: int) -> int:
    """The count column: elements per rank for all_gather / reduce_scatter / alltoall (what
    the NCCL call takes), the whole buffer otherwise."""
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
        return count // world
    return count


def time_str(time_us: float) -> str:
    """nccl-tests' width-7 time: 2 decimals below 100 µs, 1 below 10 ms, none above."""
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def side(row: dict[str, Any] | None, checked: bool = True) -> str:
    """One half of a result line (time, algbw, busbw, #wrong); N/A where not measured."""
    if row is None:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>5}"
    wrong = f"{float(row['wrong']):5g}" if checked else f"{'N/A':>5}"
    return (
        f"  {time_str(row['time_median_s'] * 1e6)}  {row['algbw_GBps']:6.2f}  "
        f"{row['busbw_GBps']:6.2f}  {wrong}"
    )


def result_line(
    op: Op,
    world: int,
    out_of_place: dict[str, Any] | None,
    in_place: dict[str, Any] | None,
    checked: bool = True,
) -> str:
    ref = out_of_place or in_place
    assert ref is not None, "a result line needs at least one measured side"
    return (
        f"{ref['size_bytes']:12d}  {param_count(op, ref['count'], world):12d}  "
        f"{NCCL_TYPES.get(ref['dtype'], ref['dtype']):>8}  {REDOP[op]:>6}  "
        f"{ROOT.get(op, -1):6d}" + side(out_of_place, checked) + side(in_place, checked)
    )


def step_text(sizes: Sequence[int]) -> str:
    if (
        len(sizes) > 1
        and sizes[0] > 0
        and all(b == a * (sizes[1] // sizes[0]) for a, b in pairwise(sizes))
    ):
        return f"{sizes[1] // sizes[0]}(factor)"
    if len(sizes) > 1:
        return f"{sizes[1] - sizes[0]}(bytes)"
    return "1(factor)"


def preamble(
    op: Op,
    sizes: Sequence[int],
    warmup: int,
    iters: int,
    check: bool,
    ranks: Sequence[dict[str, Any]],
    note: str,
) -> str:
    """`# nThread ...` and `# Using devices`, one line per rank as nccl-tests prints them."""
    lines = [
        f"# Collective test starting: {PERF_BINARY[op]}",
        f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: "
        f"{step_text(sizes)} warmup iters: {warmup} iters: {iters} agg iters: 1 "
        f"validation: {int(check)} graph: 0",
        "#",
        "# Using devices",
    ]
    for r in ranks:
        lines.append(
            f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['hostname']:>10} device "
            f"{r.get('device', 0):2d} [{r.get('bus', '0000:00:00')}] {r.get('device_name', 'cpu')}"
        )
    lines.append(f"# {note}")
    return "\n".join(lines) + "\n" + HEADER


def footer(op: Op, sides: Sequence[dict[str, Any]], checked: bool = True) -> str:
    """Out-of-bounds count (sides with a wrong element) and the mean busbw of every side."""
    errors = sum(1 for s in sides if s["wrong"]) if checked else 0
    avg = sum(s["busbw_GBps"] for s in sides) / len(sides) if sides else 0.0
    return (
        f"# {'Out of bounds values':<20} : {errors} {'FAILED' if errors else 'OK'}\n"
        f"# {'Avg bus bandwidth':<20} : {avg:g} \n"
        "#\n"
        f"# Collective test concluded: {PERF_BINARY[op]}"
    )
