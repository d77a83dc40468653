"""The training-step model: hand-computed terms, monotone properties, refusals, search."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from bandwall.errors import ConfigError, LayoutError
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.planning.api import sweep
from bandwall.planning.request import make_request
from bandwall.planning.resolve import resolve_cluster
from bandwall.workloads import get_workload
from tests.conftest import PINNED, plan_of

plan = plan_of


def test_mfu_counts_model_flops_over_the_step() -> None:
    """MFU = (6N + causal attention FLOPs) per token × tokens / (step × GPUs × peak), the way
    Megatron-Bridge counts (its 25.11 H100 Llama 3 8B row: 744 TFLOP/s at 14,451 tokens/s);
    compute time itself comes from the shapes (tests/model/test_terms.py)."""
    p = plan(model="llama3-8b", gpus=64, tp=4, recompute="selective")
    w = get_workload("llama3-8b")
    # by hand: 6·N_matmul (input embedding left out) + 12·L·a·d·s / 2 for the causal half
    n_matmul = w.params - w.vocab * w.hidden
    per_token = 6 * n_matmul + 12 * 32 * 32 * 128 * 8192 / 2
    assert per_token * 14_451 / 1e12 == pytest.approx(744, abs=0.5)  # Megatron-Bridge's figure
    flops = 512 * 8192 * per_token  # default 4 Mi tokens = 512 sequences of 8192
    assert p.metrics["mfu"] == pytest.approx(flops / (p.metrics["step_time_s"] * 64 * 989.4e12))
    assert p.metrics["tflops_per_gpu"] == pytest.approx(flops / p.metrics["step_time_s"] / 64e12)


@pytest.mark.parametrize(("schedule", "v"), [("1f1b", 1), ("interleaved", 2)])
def test_pipeline_bubble_matches_closed_form(schedule: str, v: int) -> None:
    # 1F1B bubble = (p-1)/m of the ideal time; interleaved with v chunks: (p-1)/(v·m)
    p = plan(
        model="llama3-70b",
        gpus=64,
        tp=8,
        pp=4,
        global_batch=16,
        schedule=schedule,
        virtual_stages=v,
        recompute="full",
        cp=1,
        zero=1,
        micro_batch=1,
    )
    m = p.layout["micro_batches"]
    assert m == 16 // 2
    # per micro-batch per stage: compute (less the once-per-step optimizer) and exposed TP
    per_step = p.metrics["optimizer_s"]
    stage = (p.breakdown["compute"] - per_step + p.breakdown["tp"]) / m
    assert p.breakdown["bubble"] == pytest.approx((4 - 1) / v * stage, rel=1e-9)


def test_ddp_overlap_hides_all_but_the_last_bucket_or_the_excess() -> None:
    """resnet50 on 16 GPUs over 15 Gb/s. DDP (ZeRO-0): exposed = max(T_ar − ⅔ t_mb, T_ar ×
    bucket), the backward of the micro-batch hiding the all-reduce (Li et al. 2020). A sharded
    optimizer (ZeRO-1, Megatron-Core's distributed optimizer with --overlap-grad-reduce and
    --overlap-param-gather): the gradients' reduce-scatter behind the backward, the weights'
    all-gather behind the next forward (⅓ t_mb), each never less than one bucket."""
    common = dict(
        model="resnet50",
        gpus=16,
        preset="decentralized-colocated",
        bandwidth_Gbps=15,
        jitter_us=200,
        zero=0,
        micro_batch=64,
    )
    fields_on = make_request(**common)
    cl = resolve_cluster(fields_on)
    params = get_workload("resnet50").params
    grads = params * 4.0  # fp32 reduction (the default)
    buckets = math.ceil(grads / (25 * 2**20))  # DDP's 25 MiB buckets, reduced one by one
    topo = cl.group_topology(1.0)

    def bucketed(op: Op, total: float) -> float:
        count = math.ceil(total / (25 * 2**20))
        return count * float(collective_time_s(op, Algo.AUTO, total / count, 16, topo))

    t_ar = bucketed(Op.ALL_REDUCE, grads)
    assert buckets == math.ceil(grads / (25 * 2**20))
    on, off = plan(**common), plan(**common, overlap=False)
    t_mb = on.metrics["compute_s"] - on.metrics["optimizer_s"]  # one micro-batch per step
    bucket = min(1.0, 25 * 2**20 / grads)
    assert off.breakdown["dp"] == pytest.approx(t_ar)
    assert on.breakdown["dp"] == pytest.approx(max(t_ar - 2 / 3 * t_mb, t_ar * bucket))
    assert on.metrics["comm_efficiency"] > off.metrics["comm_efficiency"]
    sharded = plan(**{**common, "zero": 1})
    t_mb = sharded.metrics["compute_s"] - sharded.metrics["optimizer_s"]
    t_rs = bucketed(Op.REDUCE_SCATTER, grads)
    t_ag = bucketed(Op.ALL_GATHER, params * 2.0)  # bf16 weights
    expected = max(t_rs - 2 / 3 * t_mb, t_rs * bucket) + max(t_ag - t_mb / 3, t_ag * bucket)
    assert sharded.breakdown["dp"] == pytest.approx(expected)


def test_more_bandwidth_is_never_slower() -> None:
    bws = list(np.geomspace(0.5, 1600, 25))
    for model, layout in [
        ("llama3-70b", {"tp": [8], "pp": [4]}),
        ("llama3-8b", {"tp": [1, 2, 8], "zero": [1, 3]}),
        ("mixtral-8x7b", {"tp": [2], "ep": [4]}),
        ("resnet50", {}),
    ]:
        req = make_request(
            model=model, gpus=256, preset="decentralized-colocated", **{**PINNED, "micro_batch": 1}
        )
        out = sweep(req, {"bandwidth_Gbps": bws, **layout})
        step = out["step_time_s"].reshape(len(bws), -1)
        assert np.all(np.diff(step, axis=0) <= 1e-12 * step[:-1]), model


def test_more_dp_ranks_never_less_total_comm_volume() -> None:
    req = make_request(model="llama3-8b", gpus=64, global_batch=2048, **PINNED, micro_batch=1)
    out = sweep(req, {"gpus": [16, 32, 64, 128, 256, 512], "tp": [1, 4]})
    total = (out["dp_bytes_per_gpu"] * out["gpus"]).reshape(6, 2)
    assert np.all(np.diff(total, axis=0) > 0)


def test_memory_check_refuses_a_layout_that_does_not_fit() -> None:
    # 81,559 MiB as nvidia-smi reports an H100, less 1.5 GiB (CUDA context, NCCL): 83.9 GB
    with pytest.raises(LayoutError, match=r"memory: .* needs [\d,.]+ GB per GPU.*83.9 GB usable"):
        plan(model="llama3-405b", gpus=8)
    with pytest.raises(LayoutError, match="no layout of llama3-405b fits"):
        plan(model="llama3-405b", gpus=8, auto=True)


def test_layout_errors_are_specific() -> None:
    with pytest.raises(LayoutError, match=r"gpus: 1000 is not divisible by tp×pp×cp"):
        plan(model="llama3-70b", gpus=1000, tp=8, pp=4)
    # a degree that alone cannot divide the GPUs is the one named, with the values it can take
    with pytest.raises(LayoutError, match=r"pp: 1,000 does not divide the 64 GPUs; pp can be 1, 2"):
        plan(model="llama3-8b", gpus=64, pp=1000)
    with pytest.raises(
        LayoutError, match=r"pp: 3 .* left by the other degrees \(8\); pp can be 1, 2, 4, 8$"
    ):
        plan(model="llama3-8b", gpus=64, tp=8, pp=3)
    with pytest.raises(LayoutError, match="tp: 16 must divide the 8 GPUs of a node"):
        plan(model="llama3-70b", gpus=64, tp=16)
    with pytest.raises(LayoutError, match="tp: 2 needs a scale-up fabric"):
        plan(model="llama3-8b", gpus=16, tp=2, gpus_per_node=1)
    with pytest.raises(LayoutError, match="ep: llama3-8b is dense"):
        plan(model="llama3-8b", gpus=16, ep=2)
    with pytest.raises(LayoutError, match="only data parallelism"):
        plan(model="resnet50", gpus=16, tp=2)
    with pytest.raises(LayoutError, match="global-batch: 100 is not divisible"):
        plan(model="llama3-8b", gpus=16, global_batch=100, **PINNED, micro_batch=1)
    # left free, the search finds a layout whose dp divides the batch: dp 4 × 25 micro-batches
    assert plan(model="llama3-8b", gpus=16, global_batch=100, pp=1).layout["dp"] in (1, 2, 4)
    with pytest.raises(ConfigError, match="preset: unknown value"):
        plan(model="llama3-8b", gpus=16, preset="moon")
    with pytest.raises(ConfigError, match="straggler-fraction"):
        plan(model="llama3-8b", gpus=16, straggler_fraction=1.5)
    # the micro-batch asked for is what does not divide, not the GPU count (64 splits 512)
    with pytest.raises(LayoutError, match="micro-batch: --micro-batch 1,000 does not divide"):
        plan(model="llama3-8b", gpus=64, micro_batch=1000)


def test_what_a_plan_does_not_price_or_rounds_it_says() -> None:
    """--loss on an RDMA fabric is not priced (a review found it silently ignored), and a
    default batch rounded to split evenly says so in the assumptions."""
    from bandwall.report.tables import assumption_rows

    p = plan(model="llama3-8b", gpus=64, loss_rate=0.5)
    assert any("--loss 0.5 is not priced" in n for n in p.notes)
    rounded = dict(assumption_rows(plan(model="llama3-8b", gpus=64, micro_batch=3)))
    # the multiple is dp × micro-batch, and the batch is one of them
    found = re.search(
        r"the default 512, rounded to a multiple of dp × micro-batch = "
        r"(\d+) × 3 = ([\d,]+)\)",
        rounded["global batch"],
    )
    assert found, rounded["global batch"]
    gb = int(rounded["global batch"].split(" sequences")[0].replace(",", ""))
    assert gb % int(found.group(2).replace(",", "")) == 0
    kept = dict(assumption_rows(plan(model="llama3-8b", gpus=64)))
    assert kept["global batch"].endswith("(default)")


def test_auto_is_no_slower_than_hand_layouts_and_fits() -> None:
    best = plan(model="llama3-70b", gpus=512, auto=True)
    assert best.metrics["memory_bytes"] <= best.metrics["memory_capacity_bytes"]
    for tp, pp in [(8, 1), (8, 2), (8, 4), (4, 4), (8, 8)]:
        try:
            manual = plan(model="llama3-70b", gpus=512, tp=tp, pp=pp)
        except LayoutError:
            continue
        assert best.metrics["step_time_s"] <= manual.metrics["step_time_s"] * (1 + 1e-9)


def test_diloco_amortises_dp_over_h_steps_and_says_so() -> None:
    common = dict(model="llama3-8b", gpus=64, preset="decentralized-geo", **{**PINNED, "tp": 8})
    sync = plan(**common)
    # every data-parallel replica a worker: all synchronisation moves to the outer step,
    # once per 100 steps, not overlapped
    local = plan(**common, local_sgd_steps=100, diloco_workers=8)
    assert local.breakdown["dp"] < sync.breakdown["dp"] / 10
    assert any("not modelled" in n for n in local.notes)
    assert local.metrics["egress_usd"] == pytest.approx(sync.metrics["egress_usd"] / 100, rel=0.05)


def test_int8_compression_halves_bandwidth_bound_dp_time() -> None:
    """int8 gradients halve what DDP all-reduces; with a sharded optimizer only the gradients'
    reduce-scatter shrinks, the bf16 weights' all-gather does not: (1 + 2) / (2 + 2)."""
    common = dict(
        model="bert-large",
        gpus=64,
        preset="decentralized-colocated",
        overlap=False,
        reduce_dtype="bf16",
        **{**PINNED, "zero": 0},
        micro_batch=1,
    )
    bf16, int8 = plan(**common), plan(**common, compression="int8")
    assert int8.breakdown["dp"] == pytest.approx(bf16.breakdown["dp"] / 2, rel=0.02)
    sharded = {**common, "model": "llama3-8b", "zero": 1}
    bf16, int8 = plan(**sharded), plan(**sharded, compression="int8")
    assert int8.breakdown["dp"] == pytest.approx(bf16.breakdown["dp"] * 0.75, rel=0.02)


def test_stragglers_delay_synchronous_steps() -> None:
    base = plan(model="llama3-8b", gpus=1024, global_batch=1024, **PINNED, micro_batch=1)
    slow = plan(
        model="llama3-8b",
        gpus=1024,
        global_batch=1024,
        straggler_fraction=0.01,
        straggler_slowdown=0.2,
        **PINNED,
        micro_batch=1,
    )
    p_any = 1 - 0.99**1024
    assert slow.breakdown["straggler"] == pytest.approx(base.metrics["compute_s"] * 0.2 * p_any)


def test_cost_is_gpu_hours_times_price_plus_egress() -> None:
    p = plan(model="llama3-8b", gpus=64, tokens=1e11, preset="hyperscaler-vm")
    assert p.metrics["gpu_hours"] == pytest.approx(64 * p.metrics["time_to_train_s"] / 3600)
    assert p.metrics["cost_usd"] == pytest.approx(p.metrics["gpu_hours"] * 4.25)
    # whole steps: 1e11 tokens in steps of global_batch × 8,192 tokens, the last one full
    steps = math.ceil(1e11 / (p.metrics["global_batch"] * 8192))
    assert p.metrics["steps"] == steps
    ideal = steps * p.metrics["step_time_s"]
    assert p.metrics["ideal_time_s"] == pytest.approx(ideal)
    assert p.metrics["time_to_train_s"] == pytest.approx(ideal / p.metrics["goodput"])
    assert 0.9 < p.metrics["goodput"] < 1


def test_sweep_rows_equal_single_plans() -> None:
    for fields in (
        dict(
            model="llama3-70b", gpus=512, preset="decentralized-colocated", tp=8, pp=4, tokens=1e12
        ),
        dict(model="resnet50", gpus=64, preset="hyperscaler-vm"),
    ):
        req = make_request(**fields)
        one = plan(**fields)
        row = sweep(
            req, {"bandwidth_Gbps": [float(one.to_json()["cluster"]["scale_out_Gbps_per_nic"])]}
        )
        assert float(row["step_time_s"][0]) == pytest.approx(one.metrics["step_time_s"])
        assert float(row["cost_usd"][0]) == pytest.approx(one.metrics["cost_usd"])


def test_sweep_over_two_looped_axes_labels_every_row() -> None:
    """global_batch is both a looped axis and a metric: one column, and each row is the plan
    of its own labels (found by re-answering docs/scenarios.md: the rows were mislabelled)."""
    req = make_request(model="resnet50", gpus=64, preset="decentralized-colocated")
    out = sweep(req, {"global_batch": [1024, 4096], "local_sgd_steps": [1, 100]})
    n = len(out["step_time_s"])
    assert n == 4 and all(len(v) == n for v in out.values())
    for i in range(n):
        gb, h = int(float(out["global_batch"][i])), int(out["local_sgd_steps"][i])
        one = plan(
            model="resnet50",
            gpus=64,
            preset="decentralized-colocated",
            global_batch=gb,
            local_sgd_steps=h,
        )
        assert float(out["step_time_s"][i]) == pytest.approx(one.metrics["step_time_s"])
    assert [int(float(g)) for g in out["global_batch"]] == [1024, 1024, 4096, 4096]


def test_diloco_workers_per_site_pay_no_pipeline_egress() -> None:
    """DiLoCo workers sit one per site, so their pipelines never leave it: egress is the outer
    sync alone, whatever pp (it was billed as a pipeline across sites at pp = sites)."""
    common = dict(
        model="llama3-8b",
        gpus=256,
        tp=8,
        tokens=1e12,
        preset="decentralized-geo",
        local_sgd_steps=100,
    )
    egress = {pp: plan(**common, pp=pp).metrics["egress_usd"] for pp in (1, 2, 4)}
    assert egress[1] > 0 and egress[4] == pytest.approx(egress[1]) == egress[2]
    synchronous = plan(**{**common, "local_sgd_steps": 1}, pp=4).metrics["egress_usd"]
    assert synchronous > 50 * egress[4]  # a synchronous pipeline does cross the sites


def test_diloco_across_sites_with_fsdp_inside() -> None:
    """Issue 13's geo case: 64 H100 in 8 nodes across continents, FSDP inside each node, DiLoCo
    across nodes every 100 steps with int8 pseudo-gradients over 1 Gb/s internet."""
    common = dict(
        model="llama3-8b",
        gpus=64,
        preset="decentralized-geo",
        sites=8,
        wan="internet-1g",
        zero=3,
        tp=1,
        pp=1,
        cp=1,
        micro_batch=1,
    )
    sync = plan(**common)
    p = plan(**common, local_sgd_steps=100, outer_compression="int8")
    m = p.metrics
    assert p.layout["zero"] == 3 and m["outer_sync_s"] > 0
    assert m["compute_utilisation"] == pytest.approx(1 - m["dp_s"] / m["step_time_s"])
    assert 0.5 < m["compute_utilisation"] < 1 and sync.metrics["compute_utilisation"] < 0.2
    # int8 moves a quarter of fp32; streaming hides the sync behind the next 100 steps
    fp32 = plan(**common, local_sgd_steps=100)
    assert m["outer_sync_s"] < 0.3 * fp32.metrics["outer_sync_s"]
    streaming = plan(**common, local_sgd_steps=100, outer_compression="int8", outer_overlap=True)
    assert streaming.metrics["outer_sync_s"] < m["outer_sync_s"]
    # the outer state (fp32 momentum and weight copy) sits with the sharded optimizer state
    cpu = plan(**common, local_sgd_steps=100, outer_state_on_cpu=True)
    w = get_workload("llama3-8b")
    extra = p.metrics["memory_optimizer_bytes"] - cpu.metrics["memory_optimizer_bytes"]
    assert extra == pytest.approx(8 * w.params / 8)


def test_wan_uplink_is_shared_by_concurrent_groups() -> None:
    """A site's uplink carries every group that crosses it at once: PP across two sites sends
    dp·tp pipelines' activations through the same link (the review: 0.14 s → 111.6 s)."""
    common = dict(
        model="llama3-70b",
        gpus=64,
        preset="decentralized-geo",
        sites=2,
        tp=8,
        pp=2,
        cp=1,
        zero=1,
        micro_batch=1,
    )
    p = plan(**common)
    assert p.layout["virtual_stages"] == 1  # no interleaving across the WAN by default
    assert p.breakdown["pp"] + p.breakdown["bubble"] > 1.0


def test_more_nics_than_gpus_is_said_not_silently_capped() -> None:
    """16 NICs on an 8-GPU node price as 8 (one per GPU): the plan says so and how to price
    two NICs per GPU as a bundle (issue 21: the cap was silent)."""
    p = plan(model="llama3-8b", gpus=64, nics_per_node=16, failures=False)
    said = [n for n in p.notes if "--nics-per-node 16 is priced as 8" in n]
    assert said and "× 2 with --bandwidth" in said[0]
    eight = plan(model="llama3-8b", gpus=64, nics_per_node=8, failures=False)
    assert p.metrics["step_time_s"] == eight.metrics["step_time_s"]
    assert not any("priced as" in n for n in eight.notes)


def test_a_pipeline_longer_than_a_node_pays_the_network_between_its_stages() -> None:
    """pp 16 stages of 4 GPUs (cp 2 x dp 2) on 8-GPU nodes: two stages share a node, so every
    other boundary crosses the NICs and the pipeline runs at that hop's pace (a newcomer's
    review found the step the same at 0.1 and 400 Gb/s)."""
    fixed = dict(
        model="llama3-8b", gpus=64, tp=1, pp=16, cp=2, virtual_stages=2, micro_batch=1, zero=1
    )
    slow = plan(**fixed, bandwidth_Gbps=0.1).metrics
    fast = plan(**fixed, bandwidth_Gbps=400.0).metrics
    assert slow["pp_s"] > 100 * fast["pp_s"]
    # at least one forward and one backward send per micro-batch over the crossing hop: a
    # micro-batch's activations on one cp rank (8192 x 4096 x 2 B / 2), the 4 pipelines that
    # cross a node sharing its 8 NICs (2 each, 0.1 Gb/s apiece)
    send_s = 8192 * 4096 * 2 / 2 / (2 * 0.1e9 / 8)
    assert slow["pp_s"] >= slow["micro_batches"] * 2 * send_s
    # a pipeline inside one node (pp 2 of 4-GPU stages) stays on NVLink
    inside = dict(fixed, gpus=8, pp=2, virtual_stages=1)
    assert plan(**inside, bandwidth_Gbps=0.1).metrics["pp_s"] == pytest.approx(
        plan(**inside, bandwidth_Gbps=400.0).metrics["pp_s"]
    )


def test_auto_recompute_fits_the_whole_gpu_not_just_the_kept_activations() -> None:
    """Llama 3 70B tp 8 pp 4 with DiLoCo's outer state at 9 Gb/s: the layout without cp sat
    0.3 GB over the GPU because AUTO left the backward's working set and the allocator out of
    its budget, and the search fell back to cp 2 over TCP (396 s a step instead of 12 s)."""
    p = plan(
        model="llama3-70b",
        gpus=512,
        tp=8,
        pp=4,
        tokens=1e12,
        preset="decentralized-colocated",
        local_sgd_steps=100,
        bandwidth_Gbps=9.0,
    )
    m = p.metrics
    assert p.layout["cp"] == 1 and m["step_time_s"] < 20
    assert 0 < m["recompute_share"] < 0.1 and m["memory_bytes"] <= m["memory_capacity_bytes"]


def test_default_batch_grows_with_the_gpu_count_above_4096() -> None:
    """4 Mi tokens up to 4,096 GPUs, then 1 Ki tokens per GPU: Llama 3 405B's 16 Mi tokens on
    16,384 H100 (Llama 3 paper Table 4), the fewest per GPU of any published run of >= 2,048
    GPUs in published_runs.csv that trains a model for use. MLPerf Training's GPT-3 runs (512
    tokens per GPU on 10,752 and 11,616 H100) are left out: a time-to-train benchmark sets its
    batch for the benchmark's convergence target, not for a model anyone keeps. A swept count
    gets its own default; a given batch is kept."""
    from bandwall.measure.calibrate.runs import load_runs
    from bandwall.planning.api import DEFAULT_BATCH_TOKENS_PER_GPU, default_global_batch

    runs = [r for r in load_runs() if not r["id"].startswith("mlperf")]
    big = [r for r in runs if r["global_batch"] and int(r["gpus"]) >= 2048]
    fewest = min(int(r["global_batch"]) * int(r["seq_len"]) / int(r["gpus"]) for r in big)
    assert fewest == DEFAULT_BATCH_TOKENS_PER_GPU
    w = get_workload("llama3-8b")  # 8,192-token sequences
    assert default_global_batch(w, 1024) == 512 == default_global_batch(w, 4096)
    assert default_global_batch(w, 16384) == 2048
    assert list(default_global_batch(w, np.array([8, 8192, 16384]))) == [512, 1024, 2048]
    assert default_global_batch(get_workload("resnet50"), 16384) == 1024  # CNNs stay fixed
    rows = sweep(make_request(model="llama3-8b", gpus=1024), {"gpus": [1024, 16384]})
    assert [int(b) for b in rows["global_batch"]] == [512, 2048]
    p = plan(model="llama3-8b", gpus=16384, tp=8, pp=1, cp=1, micro_batch=1)
    assert p.metrics["global_batch"] == 2048  # one sequence per data-parallel rank
    assert plan(model="llama3-8b", gpus=16384, global_batch=4096).metrics["global_batch"] == 4096


def test_a_batch_larger_than_the_budget_is_one_whole_step() -> None:
    """A run takes whole optimizer steps, at least one: a batch of more tokens than --tokens
    trains for one step, and time to train is never shorter than the step itself."""
    p = plan(model="llama3-8b", gpus=64, global_batch=1_000_000, tokens=1e9)
    assert p.metrics["steps"] == 1
    assert p.metrics["time_to_train_s"] >= p.metrics["step_time_s"]


def test_a_pipeline_that_splits_layers_unevenly_says_so() -> None:
    """32 layers over pp 3 × v 3 = 9 chunks are 3.6 layers a chunk: the plan says how it
    prices that (chunks of 3 and 4) and what Megatron would ask; an even split says nothing."""
    from bandwall.planning.api import plan

    fixed = {"model": "llama3-8b", "tp": 1, "cp": 1, "pp": 3}
    uneven = plan(make_request(**fixed, gpus=96, virtual_stages=3))
    (note,) = [n for n in uneven.notes if "do not split evenly" in n]
    assert "32 layers over pp 3 × 3 virtual stages = 9 model chunks" in note
    assert "chunks of 3 and 4 layers" in note
    even = plan(make_request(**{**fixed, "pp": 4}, gpus=128, virtual_stages=2))
    assert not [n for n in even.notes if "do not split evenly" in n]
    given = plan(make_request(**fixed, gpus=96, virtual_stages=1, pp_first_stage_layers=10))
    assert not [n for n in given.notes if "do not split evenly" in n]
