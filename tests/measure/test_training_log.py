"""The training-log reader on real published logs (tests/data/train_logs/README.md gives each
file's source): every value below is read off the file by eye and restated here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.measure.importers.training_log import (
    GIB,
    is_training_log,
    parse_lines,
    read_log,
    summarize,
)

LOGS = Path(__file__).resolve().parents[1] / "data" / "train_logs"


def test_torchtitan_metrics_lines_with_colours_and_rank_prefixes() -> None:
    """README lines 59-67: nine rank lines of step 1990, `tps: 6,785  mfu: 39.73%`,
    `memory: 68.57GiB(86.69%)`, ANSI colour codes between the fields."""
    log = read_log(str(LOGS / "torchtitan_llama3_8b_32xh100.log"))
    assert log.framework == "torchtitan" and len(log.steps) == 9
    assert {s.rank for s in log.steps} == {0, 1, 2, 3}
    (step,) = log.by_step()
    assert step.step == 1990 and step.tokens_per_s_per_gpu == 6785
    assert step.mfu == pytest.approx(0.3973) and step.loss == pytest.approx(3.4370)
    assert step.memory_bytes == pytest.approx(68.57 * GIB)
    s = summarize(log)
    assert s.step_time_s is None and s.tokens_per_s_per_gpu == 6785  # a rate, not a time


def test_megatron_deepspeed_bloom_iterations() -> None:
    """chronicles.md lines 202-208: iterations 31214-31220, `elapsed time per iteration (s):`
    106.46, 105.90, 106.40, 106.33, 107.53, 106.36, 106.30; `TFLOPs:` 147.29 ... 147.51."""
    log = read_log(str(LOGS / "megatron_bloom176b_tr11.log"))
    assert log.framework == "megatron"
    steps = log.by_step()
    assert [s.step for s in steps] == list(range(31214, 31221))
    assert [s.step_time_s for s in steps] == [
        106.46,
        105.90,
        106.40,
        106.33,
        107.53,
        106.36,
        106.30,
    ]
    assert steps[0].tflops_per_gpu == 147.29 and steps[-1].tflops_per_gpu == 147.51
    assert all(s.global_batch == 2048 and s.skipped == 0 and s.nan == 0 for s in steps)
    s = summarize(log)
    # the first logged step is dropped; the median of the other six
    assert s.kept == list(range(31215, 31221))
    assert s.step_time_s == pytest.approx((106.33 + 106.36) / 2)


def test_megatron_ms_and_tflops_per_gpu() -> None:
    """Megatron-LM issue 756: 5361.6, 5470.7, 5829.9 ms; 243.6, 238.7, 224.0 TFLOP/s/GPU."""
    s = summarize(read_log(str(LOGS / "megatron_mixtral_8x7b_issue756.log")))
    assert s.kept == [72, 73] and s.global_batch == 128
    assert s.step_time_s == pytest.approx((5.4707 + 5.8299) / 2)
    assert s.tflops_per_gpu == pytest.approx((238.7 + 224.0) / 2)


def test_megatron_fp16_warm_up_steps_are_skipped_iterations() -> None:
    """The AWS GPT-3 README log: iterations 1-3 each skip one iteration while the loss scale
    halves from 2^32; no steady step remains, and the error says why."""
    log = read_log(str(LOGS / "megatron_gpt3_aws_readme.log"))
    steps = log.by_step()
    assert [s.loss_scale for s in steps] == [4294967296.0, 2147483648.0, 1073741824.0]
    assert [s.skipped for s in steps] == [1, 1, 1]
    assert steps[0].step_time_s == pytest.approx(255.9405)
    with pytest.raises(ConfigError, match="every step with a time was dropped"):
        summarize(log)


def test_deepspeed_throughput_timer_skips_and_overflows() -> None:
    """DeepSpeed-Chat OPT-1.3b: `CurrSamplesPerSec=171.979...` every 10 steps, 10 steps in
    7.448 s (01:46:59,171 -> 01:47:06,619), `step=10, skipped=6`, `MaxMemAllocated=22.95GB`,
    five loss-scale reductions 65536 -> 2048."""
    log = read_log(str(LOGS / "deepspeed_chat_opt-1.3b.log"))
    assert log.framework == "deepspeed"
    assert log.loss_scale_changes[0][1:] == (65536.0, 32768.0)
    assert log.loss_scale_changes[-1][2] == 2048.0 and len(log.loss_scale_changes) == 5
    steps = log.by_step()
    assert steps[0].step == 10 and steps[0].skipped == 6 and steps[1].skipped == 0
    assert steps[1].step_time_s == pytest.approx(7.448 / 10, rel=1e-3)
    s = summarize(log)
    assert s.skipped == 6 and s.memory_bytes == pytest.approx(22.95 * GIB)
    assert 0.74 < (s.step_time_s or 0) < 0.75 and 171 < (s.samples_per_s or 0) < 173


def test_deepspeed_wall_clock_breakdown_timers() -> None:
    """ZenFlow benchmark README: `time (ms) | fwd: 55.15 | bwd: 180.82 | ... | step: 183.61`."""
    log = read_log(str(LOGS / "deepspeed_timers_zenflow.log"))
    assert log.timers_ms["fwd"] == [55.15, 0.59] and log.timers_ms["bwd_allreduce"] == [
        160.15,
        50.48,
    ]
    assert log.timers_ms["step"] == [183.61, 128.77]
    with pytest.raises(ConfigError, match="no step times"):
        summarize(log)  # phases only: with an overlapped optimizer they do not add up


def test_hf_trainer_header_progress_and_runtime() -> None:
    """bigscience gpt2-hf-ds: the Trainer's header (4 per device, 256 total, 4 steps), tqdm
    `225.28s/it ... 219.64s/it` with carriage returns, `'train_runtime': 871.787`."""
    log = read_log(str(LOGS / "hf_trainer_gpt2_deepspeed_n16.out"))
    assert log.framework == "hf-trainer"
    assert log.header["Instantaneous batch size per device"] == 4
    assert log.header["Total optimization steps"] == 4
    s = summarize(log)
    assert s.global_batch == 256 and s.kept == [2, 3, 4]
    assert 219 < (s.step_time_s or 0) < 220
    assert any("train_runtime 871.8 s over 4 steps" in n for n in log.notes)
    assert [c[2] for c in log.loss_scale_changes] == [256.0, 128.0]


def test_hf_trainer_bars_before_training_are_not_steps() -> None:
    """The same log behind a tokenizer bar (1,000 examples at 95 it/s) and a checkpoint-shards
    bar read 14 steps of 10 ms and dropped the real 218 s ones as outliers (fuzz round 21,
    B1): only the bar counting the header's 4 optimization steps gives steps."""
    text = (LOGS / "hf_trainer_gpt2_deepspeed_n16.out").read_text()
    tokenizer = "".join(
        f"Running tokenizer on dataset: {k * 10:3d}%|#   | {k * 100}/1000 "
        f"[00:{k:02d}<00:{10 - k:02d}, 95.11it/s]\r"
        for k in range(1, 11)
    )
    shards = "".join(
        f"Loading checkpoint shards: {k * 25}%|##  | {k}/4 [00:0{k}<00:0{4 - k}, 1.21s/it]\r"
        for k in range(1, 5)
    )
    lines = text.splitlines()
    log = parse_lines([*lines[:1], tokenizer + "\n", shards + "\n", *lines[1:]])
    s = summarize(log)
    assert s.kept == [2, 3, 4] and 219 < (s.step_time_s or 0) < 220
    notes = " ".join(log.notes)
    assert "14 updates of other progress bars (Loading checkpoint shards: (4), " in notes
    assert "Running tokenizer on dataset: (1,000)) not read as steps" in notes, notes


@pytest.mark.parametrize(
    ("name", "step_s", "loss"),
    [
        ("nemo_lightning_gpt3_aws.log", 1 / 1.27, 10.9),
        ("bionemo_lightning_aws.log", 1 / 1.73, 2.52),
    ],
)
def test_lightning_progress_bars(name: str, step_s: float, loss: float) -> None:
    log = read_log(str(LOGS / name))
    assert log.framework == "lightning"
    s = summarize(log)
    assert s.step_time_s == pytest.approx(step_s)
    assert log.by_step()[-1].loss == pytest.approx(loss)


def test_nemo2_step_timing_line() -> None:
    """NeMo 2 / Megatron-Bridge: `global_step: 29 | reduced_train_loss: 11.03 | train_step_timing
    in s: 46.84 |` (the AWS NeMo PERFORMANCE.md example)."""
    log = parse_lines(
        ["global_step: 29 | reduced_train_loss: 11.03 | train_step_timing in s: 46.84 | "]
    )
    (step,) = log.by_step()
    assert (step.step, step.step_time_s, step.loss) == (29, 46.84, 11.03)


def test_every_shipped_log_is_recognised() -> None:
    for path in LOGS.iterdir():
        if path.suffix in (".log", ".out"):
            head = path.read_text(errors="replace")[:65536]
            assert is_training_log(head), path.name
    assert not is_training_log("NCCL INFO Bootstrap : Using eth0\n")


def test_hostile_numbers_and_long_lines_do_not_break_the_reader() -> None:
    lines = [
        "iteration 5/ 10 | elapsed time per iteration (ms): " + "9" * 5000 + " |",
        "step: 3  tps: ²  mfu: nan%",
        "x" * 100_000,
        "iteration 6/ 10 | elapsed time per iteration (ms): 1e999 |",
        "iteration 7/ 10 | elapsed time per iteration (ms): 12.5 |",
    ]
    log = parse_lines(lines)
    assert [s.step for s in log.by_step()] == [7]
