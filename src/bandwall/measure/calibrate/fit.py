"""Fit the collective model's fabric parameters to a measured run, save them as a fabric
profile, and check predictions against measurements.

The model for a run of n ranks, one per host, on one switched link type: for each op with its
algorithm fixed (what the run's backend runs, `MEASURED_ALGO`), time = α·L + S·F / B_eff +
jitter, with L the latency steps and F the bytes factor, both read off the model itself.

- Jitter comes first, from the spread of the measured times: the part of (p90 − p10) that
  does not grow with size is the run-to-run spread of the latency; for a shifted-exponential
  per-step delay of mean μ = σ, a collective of L steps waiting on n ranks has mean
  L·μ + σ·√L·(H_n − 1) (`bandwall.model.collectives.expected_max_jitter_s`).
- α and 1/B_eff are then fitted by least squares on relative error, separately for large
  messages (>= `min_size`, what the link sustains) and small ones (below it, where per-message
  costs and shaping bursts dominate); B_eff over the nominal link rate is the efficiency.
- Per-op factors (measured bandwidth term / model) are fitted on the large messages.

Every fitted value lands in the profile and every one is used by the model: latency_us,
efficiency, jitter_mean_us/jitter_std_us, small_message_bytes/small_latency_us/
small_efficiency, op_time_factors. Profiles are TOML files in the catalog's fabric format, so
`--fabric measured:NAME` works wherever a fabric key does.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bandwall.catalog import FabricSpec
from bandwall.catalog.loader import check_profile_name, profile_dir
from bandwall.errors import ConfigError
from bandwall.measure.bench.store import Run, Store, parse_run_ref
from bandwall.model.collectives import (
    Algo,
    Op,
    collective_time_s,
    gloo_ring_branches,
    harmonic,
)
from bandwall.model.topology import Link, Topology
from bandwall.safeio import checked_path
from bandwall.units import GB

#: What Gloo runs for each op (pytorch ProcessGroupGloo: ring all_reduce/all_gather,
#: reduce_scatter as a ring all_reduce, binomial-tree broadcast, ring reduce + gather, direct
#: all_to_all) and, for NCCL runs, the algorithm family its tuner takes at these sizes.
MEASURED_ALGO = {
    Op.ALL_REDUCE: Algo.RING,
    Op.ALL_GATHER: Algo.RING,
    Op.REDUCE_SCATTER: Algo.RING,
    Op.BROADCAST: Algo.TREE,
    Op.REDUCE: Algo.RING,
    Op.ALL_TO_ALL: Algo.DIRECT,
    Op.SEND_RECV: Algo.DIRECT,
}
#: Below this, 2-core machines measure CPU time, not the network (shared/LAB-NOTES.md).
DEFAULT_MIN_SIZE = 1 << 20
#: (p90 − p10) of a normal spread is 2 × 1.2816 standard deviations.
P10_P90_SIGMAS = 2 * 1.2815515655446004


def load_run(ref: str, db: str | None) -> tuple[Run, list[dict[str, Any]]]:
    """A stored run by id ('latest' for the newest) or a `results export` JSON file."""
    path = checked_path(ref, field="results")
    if ref != "latest" and not (ref.isascii() and ref.isdigit()) and path.exists():
        return load_export(path)
    try:
        run_id = parse_run_ref(ref)
    except ConfigError:
        raise ConfigError(
            f"{ref[:60]!r} is neither a run id, 'latest' nor a JSON export file", field="results"
        ) from None
    with Store.reader(db) as store:
        run = store.latest("collectives") if run_id is None else store.run(run_id)
        return run, store.results(run.id)


#: Largest `results export` JSON read back (a run of 10,000 sizes is about 5 MiB).
MAX_EXPORT_BYTES = 64 << 20
#: Most rows an export may hold: what `import` stores per block (MAX_BLOCK_ROWS) times a few
#: blocks; a 100,000-row export took 50 s to validate.
MAX_EXPORT_ROWS = 40_000
#: Deepest nesting of an export JSON (it has 3 levels; a deep one is an attack on the parser).
MAX_EXPORT_DEPTH = 32


def _check_rows_list(rows: Any, path: Path) -> None:
    if not isinstance(rows, list):
        raise ConfigError(f"{str(path)!r} has no 'rows' list", field="results")
    if len(rows) > MAX_EXPORT_ROWS:
        raise ConfigError(
            f"{str(path)!r} has {len(rows):,} rows; a run holds at most {MAX_EXPORT_ROWS:,}",
            field="results",
        )


def load_export(path: Path) -> tuple[Run, list[dict[str, Any]]]:
    """A `results export` JSON file: read bounded through safeio, its nesting capped before
    parsing, the run and every row checked as the store checks its own."""
    from bandwall.measure.bench.store import check_value
    from bandwall.safeio import read_bytes

    raw = read_bytes(path, field="results", max_bytes=MAX_EXPORT_BYTES)
    depth = deepest = 0
    for byte in raw:  # brackets inside strings count too: a generous, linear bound
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    if deepest > MAX_EXPORT_DEPTH:
        raise ConfigError(
            f"{str(path)!r}: JSON nested {deepest} deep; an export is 3", field="results"
        )
    try:
        # utf-8-sig: an export saved by an editor that adds a BOM (as --from accepts)
        data = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        raise ConfigError(
            f"{str(path)!r} is not a JSON export (bandwall results export RUN)", field="results"
        ) from None
    if not (isinstance(data, dict) and isinstance(data.get("run"), dict)):
        raise ConfigError(f"{str(path)!r} has no 'run' object", field="results")
    _check_rows_list(data.get("rows"), path)
    info = data["run"]
    try:
        run = Run(**{k: info[k] for k in Run.__dataclass_fields__})
    except (KeyError, TypeError):
        raise ConfigError(
            f"{str(path)!r}: 'run' lacks the fields {', '.join(Run.__dataclass_fields__)}",
            field="results",
        ) from None
    ws = run.world_size
    if isinstance(ws, bool) or not isinstance(ws, int) or not 1 <= ws <= 1 << 24:
        raise ConfigError(f"{str(path)!r}: run.world_size is not a rank count", field="results")
    if not isinstance(run.host, dict) or not isinstance(run.backend, str):
        raise ConfigError(f"{str(path)!r}: run.host or run.backend is malformed", field="results")
    rows = []
    for i, row in enumerate(data["rows"], 1):
        if not isinstance(row, dict):
            raise ConfigError(f"{str(path)!r}: row {i} is not an object", field="results")
        for col in ("op", "size_bytes", "time_median_s"):
            problem = check_value(col, row.get(col))
            if problem:
                raise ConfigError(
                    f"{str(path)!r}: row {i}: {col} is {row.get(col)!r:.40}, {problem}",
                    field="results",
                )
        rows.append(row)
    return run, rows


def nominal_rate_Gbps(run: Run) -> float | None:
    """The lab's bottleneck link rate, when the run came from `bandwall lab run`."""
    rates = run.host.get("lab", {}).get("rates_Gbps") if isinstance(run.host, dict) else None
    return min(rates) if rates else None


def check_one_rank_per_host(run: Run) -> None:
    """The fit prices the run as one rank per host on one link (`_single_level`), and the
    profile's rate is then taken per NIC: a 2 x 8-GPU nccl-tests run fitted that way priced
    its own collective 3x too fast through `collective` (fuzz round 18, C4). Refused until the
    fit knows two levels."""
    imported = isinstance(run.args, dict) and str(run.args.get("command", "")).startswith("import")
    ranks = run.host.get("ranks") if isinstance(run.host, dict) else None
    if not imported or not isinstance(ranks, list):
        # bench and the lab lay ranks out one per (emulated) host on one link, the fit's
        # model, even when the processes share a machine
        return
    per_host: dict[str, int] = {}
    for r in ranks:
        if isinstance(r, dict) and isinstance(r.get("hostname"), str):
            per_host[r["hostname"]] = per_host.get(r["hostname"], 0) + 1
    most = max(per_host.values(), default=1)
    if most > 1:
        raise ConfigError(
            f"run {run.id} has {most} ranks on a host ({len(per_host)} hosts); calibrate fits "
            "one rank per host on one link (bench's layout, or nccl-tests with one GPU per "
            "node): measure that, or compare this run with a catalog fabric (bandwall "
            "validate RUN --fabric ...)",
            field="results",
        )


def _single_level(link: Link, backend: str = "gloo") -> Topology:
    """One rank per host on one link type, as bench runs are laid out."""
    return Topology(
        gpus_per_node=1, scale_up=None, scale_out=link, nics_per_node=1.0, backend=backend
    )


def _coefficients(
    op: Op, sizes: np.ndarray, n: int, backend: str = "gloo"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """L (seconds per unit α) and F (seconds per byte at 1 B/s) of the model, per size, and
    the same for the schedule's other side where its time is the larger of two (Gloo's ring:
    the α-β side, then the round-trip side, `gloo_ring_branches`); else the same twice."""
    algo = MEASURED_ALGO[op]
    if backend == "gloo" and algo is Algo.RING and op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER):
        (L2, F2), (L, F) = gloo_ring_branches(sizes, float(n))
        return L, F, L2, F2
    # named as calibrated links are: the fit's α and β absorb the per-call overheads
    unit_alpha = _single_level(Link("measured:a", bandwidth_Bps=np.inf, latency_s=1.0), backend)
    unit_beta = _single_level(Link("measured:b", bandwidth_Bps=1.0, latency_s=0.0), backend)
    L = np.asarray(collective_time_s(op, algo, sizes, n, unit_alpha))
    F = np.asarray(collective_time_s(op, algo, sizes, n, unit_beta))
    return L, F, L, F


class _Design(NamedTuple):
    t: np.ndarray
    L: np.ndarray
    F: np.ndarray
    sizes: np.ndarray
    alt: tuple[np.ndarray, np.ndarray]
    """(L, F) of each row's other side (equal to L, F where the schedule has one)."""


def _design(rows: list[dict[str, Any]], world: int, backend: str) -> _Design:
    """Measured times, L, F, sizes and the other side's L, F of `rows`."""
    t = np.array([float(r["time_median_s"]) for r in rows])
    cols = np.empty((4, len(rows)))
    for i, r in enumerate(rows):
        size = np.array([float(r["size_bytes"])])
        cols[:, i] = [c[0] for c in _coefficients(Op(r["op"]), size, world, backend)]
    sizes = np.array([float(r["size_bytes"]) for r in rows])
    return _Design(t, cols[0], cols[1], sizes, (cols[2], cols[3]))


def fit_jitter(
    rows: list[dict[str, Any]], world: int, backend: str = "gloo"
) -> tuple[float, float]:
    """Per-step jitter (mean μ, std σ) from the measured spread.

    The spread (p90 − p10)/2.563 of each row, over √L (L steps each add σ²), is split by least
    squares into a part that does not grow with size — σ, the latency jitter per step — and
    one that does (bandwidth variation, not modelled); μ = σ as for a shifted exponential.
    """
    use = [r for r in rows if "time_p10_s" in r and "time_p90_s" in r and r.get("wrong", 0) == 0]
    if len(use) < 2:
        return 0.0, 0.0
    d = _design(use, world, backend)
    L, sizes = d.L, d.sizes
    spread = np.array([max(float(r["time_p90_s"]) - float(r["time_p10_s"]), 0.0) for r in use])
    per_step = spread / P10_P90_SIGMAS / np.sqrt(np.maximum(L, 1.0))
    A = np.stack([np.ones_like(sizes), sizes], axis=1)
    (sigma, slope), *_ = np.linalg.lstsq(A, per_step, rcond=None)
    if slope < 0:  # no size-proportional part: all of the spread is latency jitter
        sigma = float(np.mean(per_step))
    if sigma <= 0 or not math.isfinite(sigma):
        return 0.0, 0.0
    return float(sigma), float(sigma)


def _jitter_s(L: np.ndarray, world: int, mu: float, sigma: float) -> np.ndarray:
    return np.asarray(L * mu + np.sqrt(L) * sigma * (float(harmonic(world)) - 1))


def _solve(t: np.ndarray, L: np.ndarray, F: np.ndarray, g: np.ndarray) -> tuple[float, np.ndarray]:
    k = int(g.max()) + 1
    cols = [L / t] + [np.where(g == j, F, 0.0) / t for j in range(k)]
    coef, *_ = np.linalg.lstsq(np.stack(cols, axis=1), np.ones_like(t), rcond=None)
    alpha, beta = float(coef[0]), np.asarray(coef[1:], dtype=np.float64)
    if alpha < 0 or np.any(beta <= 0):
        if np.all(beta > 0) or alpha < 0:  # latency unidentifiable: bandwidth alone
            alpha = 0.0
            beta = np.array(
                [np.sum((F / t)[g == j]) / np.sum(((F / t)[g == j]) ** 2) for j in range(k)]
            )
        else:  # bandwidth unidentifiable (tiny messages only): latency alone
            beta = np.zeros(k)
            alpha = float(np.sum(L / t) / np.sum((L / t) ** 2))
    return alpha, beta


def _least_squares(
    t: np.ndarray,
    L: np.ndarray,
    F: np.ndarray,
    group: np.ndarray | None = None,
    alt: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """α (shared) and β = 1/B_eff per group (op) minimising the relative error of
    α·L + β_group·F against t; returns α, the β of each group and the model times.

    Where a row's schedule takes the larger of two sides (`alt`: Gloo's round trips), each
    row is fitted on the side the current (α, β) make the larger, until no row changes side
    (a few passes: the sides cross once in size)."""
    g = np.zeros(len(t), dtype=np.intp) if group is None else group
    L2, F2 = (L, F) if alt is None else alt
    use_L, use_F = L, F
    for _ in range(8):
        alpha, beta = _solve(t, use_L, use_F, g)
        pick = alpha * L2 + beta[g] * F2 > alpha * L + beta[g] * F
        new_L, new_F = np.where(pick, L2, L), np.where(pick, F2, F)
        if np.array_equal(new_L, use_L) and np.array_equal(new_F, use_F):
            break
        use_L, use_F = new_L, new_F
    model = np.maximum(alpha * L + beta[g] * F, alpha * L2 + beta[g] * F2)
    return alpha, beta, model


#: How far above the line rate a measured row may land (timing noise on a shaped link; a
#: faster row means the rate given is not the link's).
MAX_ROW_OVER_LINE = 1.10


def _latency_only(
    t: np.ndarray,
    L: np.ndarray,
    F: np.ndarray,
    beta: np.ndarray,
    alt: tuple[np.ndarray, np.ndarray],
) -> tuple[float, np.ndarray]:
    """α alone (β of each row given) minimising the relative error of α·L + β·F against t,
    on the larger side of each row's schedule as `_least_squares` does; α ≥ 0."""
    use_L, use_F = L, F
    alpha = 0.0
    for _ in range(8):
        x, r = use_L / t, 1 - beta * use_F / t
        alpha = max(float(np.sum(x * r) / np.sum(x * x)), 0.0) if np.any(x > 0) else 0.0
        pick = alpha * alt[0] + beta * alt[1] > alpha * L + beta * F
        new_L, new_F = np.where(pick, alt[0], L), np.where(pick, alt[1], F)
        if np.array_equal(new_L, use_L) and np.array_equal(new_F, use_F):
            break
        use_L, use_F = new_L, new_F
    model = np.maximum(alpha * L + beta * F, alpha * alt[0] + beta * alt[1])
    return alpha, model


def _side_steps(
    t: np.ndarray,
    L: np.ndarray,
    F: np.ndarray,
    group: np.ndarray | None,
    alt: tuple[np.ndarray, np.ndarray],
) -> tuple[float, np.ndarray]:
    """α of a fit on the raw times, and each row's latency steps on the side of its schedule
    that fit puts it on: the steps its jitter accumulates over."""
    g = np.zeros(len(t), dtype=np.intp) if group is None else group
    alpha, beta, _ = _least_squares(t, L, F, g, alt)
    other = alpha * alt[0] + beta[g] * alt[1] > alpha * L + beta[g] * F
    return alpha, np.where(other, alt[0], L)


def _usable(rows: list[dict[str, Any]], world: int) -> None:
    """Rows a fit or a validation can use: a known collective, and communication at all."""
    if isinstance(world, bool) or not isinstance(world, int) or world < 2:
        raise ConfigError(
            f"the run has {world!r} rank(s); a fit needs a run of 2 or more", field="results"
        )
    known = {o.value for o in Op}
    for i, r in enumerate(rows, 1):
        if r.get("op") not in known:
            raise ConfigError(
                f"row {i}: op {r.get('op')!r:.40} is not a collective bandwall models "
                f"({', '.join(sorted(known))})",
                field="results",
            )


def fit_run(
    rows: list[dict[str, Any]],
    world: int,
    min_size: int = DEFAULT_MIN_SIZE,
    *,
    backend: str = "gloo",
    max_bandwidth_Bps: float | None = None,
) -> dict[str, Any]:
    """`_fit_run`, with a numerical failure (singular or degenerate rows) as one line."""
    _usable(rows, world)
    try:
        with np.errstate(all="ignore"):
            fit = _fit_run(
                rows, world, min_size, backend=backend, max_bandwidth_Bps=max_bandwidth_Bps
            )
    except (np.linalg.LinAlgError, ZeroDivisionError, FloatingPointError, ValueError) as exc:
        raise ConfigError(
            f"the rows cannot be fitted ({type(exc).__name__}: {exc}); check the run with "
            "bandwall results show",
            field="results",
        ) from None
    numbers = [fit["latency_s"], fit["r2"], fit["median_abs_error"], fit["max_abs_error"]]
    if not all(math.isfinite(v) for v in numbers):
        raise ConfigError(
            "the rows do not determine latency and bandwidth (the fit is not finite); "
            "measure more sizes",
            field="results",
        )
    sizes = {r["size_bytes"] for r in rows if r["wrong"] == 0 and r["size_bytes"] >= min_size}
    if len(sizes) < 2:
        raise ConfigError(
            f"the rows of >= {min_size} bytes hold one size ({len(sizes)}): latency and "
            "bandwidth need two sizes or more; measure more sizes (nothing was saved)",
            field="results",
        )
    if fit["r2"] < 0:
        raise ConfigError(
            f"the fit explains none of the rows (R2 {fit['r2']:.3f}): the times do not follow "
            "latency + size / bandwidth; check the run with bandwall results show (nothing "
            "was saved)",
            field="results",
        )
    return fit


def _fit_run(
    rows: list[dict[str, Any]],
    world: int,
    min_size: int = DEFAULT_MIN_SIZE,
    *,
    backend: str = "gloo",
    max_bandwidth_Bps: float | None = None,
) -> dict[str, Any]:
    """Jitter from the spread, then α (shared) and B_eff per op by least squares on relative
    error over rows >= min_size: B_eff is all_reduce's (else the op with most rows) and every
    op's factor is its B_eff relative to that; then a separate α and B_eff for the rows below
    min_size (when there are two sizes).

    A B_eff above `max_bandwidth_Bps` (the link's line rate) is a fit artefact when no row
    measured that fast: noisy rows trade a steeper slope for a larger α (a 1 Gbit tbf run on a
    loaded 2-core machine fitted 1.17 Gb/s from rows that all sat below 1 Gb/s). The base B_eff
    is then held at the line rate (the per-op ratios kept) and α refitted alone; a row above
    1.1 × the rate means the rate given is not the link's, and is refused."""
    correct = [r for r in rows if r["wrong"] == 0]
    use = [r for r in correct if r["size_bytes"] >= min_size]
    if len(use) < 2:
        raise ConfigError(
            f"need at least 2 correct rows of >= {min_size} bytes to fit, found {len(use)}",
            field="results",
        )
    mu, sigma = fit_jitter(correct, world, backend)
    d = _design(use, world, backend)
    t, L, F = d.t, d.L, d.F
    ops = sorted({r["op"] for r in use}, key=lambda o: (o != "all_reduce", o))
    if "all_reduce" not in ops:
        ops.sort(key=lambda o: -sum(r["op"] == o for r in use))
    group = np.array([ops.index(r["op"]) for r in use], dtype=np.intp)
    # Jitter does not grow with size, like α: the spread only bounds it from above. It cannot
    # exceed the size-independent time of a plain α-β fit, or it would eat the small rows
    # (a noisy 4-iteration run otherwise fitted 13× the line rate). Each row's jitter is over
    # the steps of the side of its schedule that fit says it is on.
    alpha_all, steps = _side_steps(t, L, F, group, d.alt)
    jit = _jitter_s(steps, world, mu, sigma)
    if np.any(jit > 0):
        k = min(1.0, float(np.min(alpha_all * steps / np.maximum(jit, 1e-300))))
        mu, sigma, jit = mu * k, sigma * k, jit * k
    net = np.maximum(t - jit, t * 1e-6)
    peak_Bps = float(np.max(F / t))
    if max_bandwidth_Bps and peak_Bps > MAX_ROW_OVER_LINE * max_bandwidth_Bps:
        # rows faster than their link: the rate given is not the run's, and a profile from it
        # would price every later plan on a wrong rate
        peak, line = peak_Bps * 8 / GB, max_bandwidth_Bps * 8 / GB
        raise ConfigError(
            f"the run measured {peak:.4g} Gb/s, {peak / line:.3g} x the {line:g} Gb/s given: "
            "give the rate the run's link had (nothing was saved)",
            field="rate",
        )
    alpha, betas, model = _least_squares(net, L, F, group, d.alt)
    capped = bool(max_bandwidth_Bps and betas[0] > 0 and 1 / betas[0] > max_bandwidth_Bps)
    if capped:
        assert max_bandwidth_Bps is not None
        betas = betas / (betas[0] * max_bandwidth_Bps)
        alpha, model = _latency_only(net, L, F, betas[group], d.alt)
    beta = float(betas[0])
    pred = model + jit
    rel = pred / t - 1
    ss_res = float(np.sum((t - pred) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2)) or 1.0
    per_op = {op: float(betas[i] / beta) for i, op in enumerate(ops)} if beta > 0 else {}
    small: dict[str, Any] | None = None
    below = [r for r in correct if r["size_bytes"] < min_size]
    if len({r["size_bytes"] for r in below}) >= 2:
        ds = _design(below, world, backend)
        ts, Ls, Fs = ds.t, ds.L, ds.F
        # the per-op factors fitted on large messages also apply below the cut
        factor = np.array([per_op.get(r["op"], 1.0) for r in below])
        alt_s = (ds.alt[0], ds.alt[1] * factor)
        _, steps_s = _side_steps(ts, Ls, Fs * factor, None, alt_s)
        jit_s = _jitter_s(steps_s, world, mu, sigma)
        a_s, b_s, model_s = _least_squares(
            np.maximum(ts - jit_s, ts * 1e-6), Ls, Fs * factor, None, alt_s
        )
        if b_s[0] > 0:
            small = {
                "max_size_bytes": min_size,
                "latency_s": a_s,
                "bandwidth_Bps": float(1 / b_s[0]),
                "rows": len(below),
                "median_abs_error": float(np.median(np.abs((model_s + jit_s) / ts - 1))),
            }
    return {
        "latency_s": alpha,
        "bandwidth_Bps": float(1 / beta) if beta > 0 else math.inf,
        "jitter_mean_s": mu,
        "jitter_std_s": sigma,
        "rows": len(use),
        "r2": 1 - ss_res / ss_tot,
        "median_abs_error": float(np.median(np.abs(rel))),
        "max_abs_error": float(np.max(np.abs(rel))),
        "op_time_factors": per_op,
        "min_size_bytes": min_size,
        "small": small,
        "backend": backend,
        "capped_at_line_rate": capped,
        "peak_row_Bps": peak_Bps,
    }


def save_profile(name: str, fit: dict[str, Any], run: Run, nominal_Gbps: float | None) -> Path:
    """Write the fit as a fabric TOML the catalog reads as `measured:NAME`."""
    check_profile_name(name)
    measured_Gbps = fit["bandwidth_Bps"] * 8 / GB
    if not (math.isfinite(measured_Gbps) and measured_Gbps > 0):
        raise ConfigError(
            "the rows do not determine a bandwidth (the fit found time independent of size); "
            "measure larger sizes or lower --min-size",
            field="results",
        )
    rate = nominal_Gbps or measured_Gbps
    eff = min(measured_Gbps / rate, 1.0)
    tcp = run.backend == "gloo"
    q = json.dumps  # a JSON string is a valid TOML basic string
    source = (
        f"bandwall calibrate on run {run.id} from {run.host.get('hostname', '?')} "
        f"({run.created_at}); fit over {fit['rows']} rows >= {fit['min_size_bytes']} B, "
        f"R2 {fit['r2']:.4f}, median error {fit['median_abs_error']:.1%}"
    )
    factors = ", ".join(f"{op} = {k:.6g}" for op, k in fit["op_time_factors"].items())
    lines = [
        "[[fabric]]",
        f"key = {q('measured:' + name)}",
        f"name = {q(f'Measured: {name} (run {run.id}, {run.world_size} ranks, {run.backend})')}",
        'tier = "scale_out"',
        f'transport = "{"tcp" if tcp else "roce"}"',
        f"bandwidth_Gbps = {rate:.6g}",
        f"latency_us = {fit['latency_s'] * 1e6:.6g}",
        f"jitter_mean_us = {fit.get('jitter_mean_s', 0.0) * 1e6:.6g}",
        f"jitter_std_us = {fit.get('jitter_std_s', 0.0) * 1e6:.6g}",
        f"efficiency = {eff:.6g}",
        f"rdma = {'false' if tcp else 'true'}",
        "in_network_reduction = false",
        f"op_time_factors = {{ {factors} }}",
    ]
    small = fit.get("small")
    if small:
        small_eff = small["bandwidth_Bps"] * 8 / GB / rate
        lines += [
            f"small_message_bytes = {int(small['max_size_bytes'])}",
            f"small_latency_us = {small['latency_s'] * 1e6:.6g}",
            f"small_efficiency = {small_eff:.6g}",
        ]
    lines += [
        f"source = {q(source)}",
        f"as_of = {dt.date.today().isoformat()}",
        f"notes = {q('all fitted parameters are applied by the model')}",
    ]
    from bandwall.safeio import write_output

    path = profile_dir() / f"{name}.toml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create {str(path.parent)!r}: {exc.strerror}", field="name"
        ) from None
    write_output(path, "\n".join(lines) + "\n", field="name", formats=(".toml",))
    return path


def validate_run(
    run: Run,
    rows: list[dict[str, Any]],
    fabric: FabricSpec,
    bandwidth_Gbps: float | None,
    min_size: int = DEFAULT_MIN_SIZE,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Predicted against measured time for every row, at the run's own link rate."""
    _usable(rows, run.world_size)
    link = Link.from_fabric(fabric)
    if bandwidth_Gbps is not None:
        link = link.with_overrides(bandwidth_Bps=bandwidth_Gbps * GB / 8)
    topo = _single_level(link, run.backend if run.backend == "gloo" else "nccl")
    out = []
    for r in rows:
        op = Op(r["op"])
        pred = float(
            collective_time_s(op, MEASURED_ALGO[op], float(r["size_bytes"]), run.world_size, topo)
        )
        out.append(
            {
                "op": r["op"],
                "size_bytes": r["size_bytes"],
                "measured_s": r["time_median_s"],
                "predicted_s": pred,
                "error": pred / r["time_median_s"] - 1,
                # rows nccl-tests found wrong are not measurements of the collective: calibrate
                # refuses them, and validate counted them (fuzz round 19, C6)
                "used": r["size_bytes"] >= min_size and int(r.get("wrong", 0) or 0) == 0,
            }
        )
    errs = [abs(x["error"]) for x in out if x["used"]]
    if not errs:
        raise ConfigError(
            f"no correct rows of >= {min_size:,.0f} bytes to validate (rows with #wrong > 0 "
            "are left out)",
            field="results",
        )
    return out, {
        "rows": len(errs),
        "median_abs_error": statistics.median(errs),
        "max_abs_error": max(errs),
        "min_size_bytes": min_size,
    }


def predict_train(
    row: dict[str, Any],
    fabric: FabricSpec,
    world: int,
    bandwidth_Gbps: float | None,
    bucket_MiB: float = 25.0,
) -> dict[str, float]:
    """The plan model's DDP step for a measured `bench train` row: measured compute plus the
    exposed all-reduce of the gradient buckets on the (calibrated) fabric, composed from the
    same terms the engine uses (model/data_parallel.py), so a lab row checks the plan."""
    from bandwall.model.data_parallel import (
        BACKWARD_SHARE,
        bucketed_all_reduce_s,
        ddp_exposed_s,
        last_bucket_share,
    )

    link = Link.from_fabric(fabric)
    if bandwidth_Gbps is not None:
        link = link.with_overrides(bandwidth_Bps=bandwidth_Gbps * GB / 8)
    topo = _single_level(link, str(row.get("backend", "gloo")))
    grads = float(row["grad_bytes"])
    t_reduce = float(
        bucketed_all_reduce_s(
            grads,
            bucket_MiB,
            lambda size: collective_time_s(
                Op.ALL_REDUCE, MEASURED_ALGO[Op.ALL_REDUCE], size, world, topo
            ),
        )
    )
    compute = float(row["compute_median_s"])
    last_bucket = t_reduce * float(last_bucket_share(bucket_MiB, grads))
    exposed = float(ddp_exposed_s(t_reduce, BACKWARD_SHARE * compute, last_bucket))
    step = compute + exposed
    return {
        "predicted_step_s": step,
        "predicted_exposed_s": exposed,
        "error": step / float(row["step_median_s"]) - 1,
    }
