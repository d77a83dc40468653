"""docs/doctor.md, generated from the rule table and the corpus scores:
`python -m bandwall.measure.doctor.docs tests/doctor/corpus > docs/doctor.md` (a test keeps the
two equal)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from bandwall.measure.doctor.corpus import Scores, evaluate, labels
from bandwall.measure.doctor.rules import RULES, Mechanism

INTRO = """\
# `bandwall doctor`: diagnose a cluster from its own evidence

Generated from `bandwall.measure.doctor.rules.RULES` and the corpus scores by
`python -m bandwall.measure.doctor.docs tests/doctor/corpus > docs/doctor.md`; a test keeps the
two equal.

People who train on a cluster already have four kinds of evidence: NCCL's debug log, PyTorch's
error and watchdog lines, the output of nccl-tests, and profiler traces. `bandwall doctor`
reads them together as one job, names the cause with the lines that show it, says what it costs
and what to try, and joins the measurements with bandwall's model of what the hardware should
give.

```
bandwall doctor LOG_OR_DIR... [--json] [--html report.html] [--fail-on SEVERITY]
                [--fabric KEY --gpu NAME --gpus-per-node N]   # hardware, when the logs don't say
                [--op OP --ranks N]                          # nccl-tests blocks that don't say
                [--model M --gpus N --tp ... ]               # the traced job, for the planner
```

Files are recognised by content, not name; folders are read recursively (hidden files and
`.source`/`.md` sidecars skipped). Every file is read once, streamed, through `bandwall.safeio`
(regular files only, gzip with a decompression cap, lines cut at 16,384 characters, NUL bytes
replaced), so FIFOs, `/dev/zero`, `/proc` files, gzip bombs and 200 MB logs are refused or read
in bounded memory, and a 60,000-character line cannot make a pattern run long.

## How a diagnosis is made

1. **Parse.** Each file goes through every registered format (an nccl-tests run with
   `NCCL_DEBUG=INFO` is both a log and a table). The NCCL log parser is a table of patterns, each
   with a literal key tested first; every fact keeps the input line it came from. It reads logs
   as they are pasted: launcher prefixes (mpirun, srun, torchrun, Ray), stripped `host:pid:tid`
   prefixes, quoted (`> `) or joined lines, several ranks cut into one line, and PyTorch's
   watchdog in every version (with and without `SeqNum=`, `Timeout at NCCL work`, desync
   reports).
2. **Join.** The logs, tables and traces given together are one job: per host, the NCCL
   versions, network plugins, NICs, transports and GPUDirect RDMA are compared; the hardware
   (GPU from device names, NICs and their speed from NET/IB lines and topology dumps) is read
   from the evidence, and what is not there is said to be unknown. An nccl-tests table is
   compared with the model only when the GPU and, across nodes, the network speed are known
   (from the log or `--gpu`/`--fabric`); the sentence names the sizes it summarises and the
   ratio is those medians' ratio.
3. **Detect.** One detector per rule returns the lines that show it and how directly they do
   (`certain`: NCCL or PyTorch states it; `likely`: the evidence points at it; `possible`: one of
   several causes of the same message). A message with several causes (IB error 12: a dead link,
   an unrouted RoCE GID, NICs on different rails) yields one finding per cause.
4. **Connect.** A path fault and the same job's nccl-tests busbw are stated together (a socket
   fallback with busbw at 3% of the model is critical, not info).
5. **Rank.** Causes before their consequences: a watchdog timeout, a dead peer or unexplained
   warnings come after any critical cause found beside them (an IB retry error, an Xid, a full
   /dev/shm, one rank's OOM). Then what stopped the job (critical, likely or certain) before
   what slows it, then confidence, then severity, then cost per step (known only where a trace
   and an nccl-tests ratio measure it).

Every finding quotes only lines present in its input (a property test over the corpus checks
it). When the evidence is partial (one line, an excerpt) the finding says what is missing and
which command would tell.
"""

CI = """\
## Exit status, CI and on-call use

| status | meaning |
|---|---|
| 0 | no finding at or above `--fail-on` (default `high`; `never` always exits 0) |
| 1 | a finding at or above `--fail-on` |
| 2 | bad input: one line on stderr naming the option or input (`error: PATHS: ...`) |

Text is wrapped at the terminal's width (80 columns in pipes). `bandwall doctor` starts without
Typer, Pydantic, numpy or rich (argparse and the standard library); a plan or hardware option
hands the command to the full CLI. numpy, the model and the trace reader load only when a table
or a trace needs them.

"""

#: The --json document: top-level key -> what it holds (docs table; keys are only added).
JSON_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "inputs[]",
        ("`path`", "`kinds` (`nccl-log`, `nccl-tests`, `trace`, registered formats)", "`notes`"),
    ),
    (
        "findings[]",
        (
            "ranked",
            "`code`",
            "`title`",
            "`severity` (critical/high/medium/low/info)",
            "`confidence` (certain/likely/possible)",
            "`mechanism`",
            "`reason`",
            "`impact`",
            "`impact_source`",
            "`check[]`",
            "`fix[]`",
            "`evidence[]` (`source`, `line`, `text`, `truncated`)",
            "`partial`",
            "`cost_s`",
            "`step_s`",
            "`cost_share`",
            "`cost_basis`",
            "`source`",
        ),
    ),
    (
        "hardware",
        (
            "`gpu`",
            "`gpu_name`",
            "`nic_link`",
            "`nics`",
            "`nic_speed_GBps`",
            "`describe` (null where unknown)",
        ),
    ),
    (
        "nccl_logs[]",
        (
            "`source`",
            "`transport`",
            "`gdr`",
            "`intra_node`",
            "`describe`",
            "`nccl_versions`",
            "`hosts`",
            "`ranks`",
            "`nics`",
            "`socket_interfaces`",
            "`env`",
            "`lines`",
            "`records`",
            "`used`",
            "`not_understood`",
        ),
    ),
    (
        "nccl_tests[]",
        (
            "`source`",
            "`first_line`",
            "`op`",
            "`ranks`",
            "`devices`",
            "`hosts`",
            "`best_busbw_GBps`",
            "`compared`",
            "`not_compared`",
            "`measured_busbw_GBps`",
            "`model_busbw_GBps`",
            "`ratio`",
            "`compared_sizes`",
            "`layout`",
            "`assumptions`",
        ),
    ),
    (
        "trace",
        (
            "`step_s`",
            "`compute_s`",
            "`comm_s`",
            "`exposed_comm_s`",
            "`exposed_share`",
            "`idle_share`",
            "`straggler`",
            "`ranks[]`",
        ),
    ),
    ("plan", ("the planner's step and exposed communication for the traced job (--model)",)),
    ("notes[]", ("what could not be read or compared, and why",)),
)


def json_markdown() -> str:
    out = [
        "## JSON (`--json`)",
        "",
        '`"schema": "bandwall.doctor/1"`; keys are only ever added. NaN and infinities are `null`.',
        "",
        "| key | content |",
        "|---|---|",
    ]
    out += [f"| `{k}` | {', '.join(v)} |" for k, v in JSON_KEYS]
    return "\n".join(out) + "\n"


FORMATS = """\
## Adding an input format

Formats are a registry (`bandwall.measure.doctor.formats`): a detector on the file's start
(64 KiB, 4 MiB for a longer file, then each later 1 MiB window of lines until it accepts one),
a streaming parser (`feed(number, line)`, `finish()`) and an `attach(job, result, input)` that
stores the result on the job. A training-log format is one entry:

```python
from bandwall.measure.doctor.formats import Format, register_format

register_format(
    Format(
        name="training-log",
        detect=lambda sample: "elapsed time per iteration" in sample,
        start=MegatronIterationParser,  # .feed(number, line) / .finish() -> result
        attach=attach_training_log,  # job.extra["training-log"].append(result); True
    )
)
```

plus a `Rule` row in `rules.RULES` and a function decorated with
`@detectors.detector("<code>")` that reads `job.extra["training-log"]` and returns `Hit`s (a
test checks every rule has a detector and every detector a rule).
"""

REST = """\
## nccl-tests output

Parsed with the nccl-tests importer (`bandwall.measure.importers.nccl_tests`; `bandwall import
nccl-tests` stores the runs so `calibrate` and `validate` use them like a bench run). Doctor
compares each block's busbw with `bandwall.model.collectives.evaluate_collective` on the
topology of the hardware read from the evidence, at the largest sizes (>= 64 MiB), where both
sides are bandwidth-bound: the text names the sizes, the measured and modelled medians, and
their ratio. Nothing is assumed: an unknown GPU or network speed leaves the block uncompared
(a note says what to pass). Below 70% of the model is `busbw_low`; above 130%,
`model_assumption`.

## Profiler traces

Chrome/Kineto JSON from `torch.profiler` (`.json` or `.json.gz`, one file per rank), streamed
(`json.JSONDecoder.raw_decode` on a 1 MiB buffer over safeio), so a 300 MB trace is analysed in
bounded memory; a cut or too deeply nested file is analysed up to the break, and fields of the
wrong type are skipped. Per `ProfilerStep#N` (the first 10,000 of a longer capture, with a
note) and rank: compute, communication, their overlap, exposed communication and idle time
(HolisticTraceAnalysis' definitions), and the straggler (the rank with the most time outside
exposed communication in at least 80% of the steps, by more than 10% of the step). With
`--model` the trace is compared with the planner; `calibrate --from-trace` refits compute
efficiency. HolisticTraceAnalysis itself is not a dependency (about 100 packages, whole traces
in pandas).

`python -m bandwall.measure.doctor.profile --out DIR` records a few real DDP steps (on a GPU
node, in the lab, or on loopback with `--local N --straggler RANK:SECONDS`).
`benchmarks/gpu_check.sh [OUT]` runs probe, collectives with `NCCL_DEBUG=INFO`, a profiled step
and doctor on a GPU node.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_markdown() -> str:
    out = ["## Rules, by mechanism", ""]
    for mech in Mechanism:
        rows = [r for r in RULES if r.mechanism is mech]
        if not rows:
            continue
        out += [
            f"### {mech.value}",
            "",
            "| rule | severity | raised when | impact | check | fix |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| `{r.code}`: {_cell(r.title)} | {r.severity.value} | {_cell(r.when)} | "
                f"{_cell(r.impact)} ({_cell(r.impact_source)}) | {_cell('; '.join(r.checks))} | "
                f"{_cell('; '.join(r.fixes))} |"
            )
        out.append("")
    return "\n".join(out)


def messages_markdown() -> str:
    """The message table (messages.py): warnings that name their cause by their source."""
    from bandwall.measure.doctor.messages import MESSAGES

    out = [
        "## Messages that name their cause",
        "",
        "A WARN line no detector above quoted is looked up here before it falls to "
        "`nccl_errors`. The rows come from an audit of every WARN template of NCCL "
        "v2.7.8-v2.30.7 and aws-ofi-nccl v1.7.4-v1.21.1 (1,531 templates, 472 the field can "
        "print): 336 had a cause the code around them names; 159 of those were named before "
        "this table, 299 with it (one synthetic line each, 2026-12-07). `likely`: the message "
        "states the cause; `possible`: one of the causes the failing call allows.",
        "",
        "| pattern | cause | confidence | why | source |",
        "|---|---|---|---|---|",
    ]
    for m in MESSAGES:
        out.append(
            f"| `{_cell(m.pattern.pattern)}` | `{m.code}` | "
            f"{'likely' if m.likely else 'possible'} | {_cell(m.why)} | {_cell(m.source)} |"
        )
    out.append("")
    return "\n".join(out)


def corpus_markdown(corpus: Path) -> str:
    rows = labels(corpus)
    scores = evaluate(corpus)
    mech = Counter((r["mechanism"], r["split"]) for r in rows)
    out = [
        "## Corpus and accuracy",
        "",
        f"{len(rows)} excerpts of real logs from public threads (`tests/doctor/corpus`, one "
        "file each, `labels.csv` with the cause each thread established, its link and the "
        "split). The split was fixed and committed before any rule was written: "
        "`sha256(id) % 3 == 0` is held out; rules were written against the build part only. "
        "Top-1: the first finding above `info` is the thread's cause; top-3: one of the first "
        "three; named: any finding. Healthy excerpts must raise nothing above `info`.",
        "",
        "| mechanism | build | held out |",
        "|---|---|---|",
    ]
    for m in sorted({r["mechanism"] for r in rows}):
        out.append(f"| {m} | {mech[(m, 'build')]} | {mech[(m, 'heldout')]} |")
    out += [
        "",
        "| part | excerpts | faults | top-1 | top-3 | named "
        "| healthy runs with a finding above info |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, split in (("build", "build"), ("held out", "heldout")):
        s = Scores.summary(scores.part(split))
        out.append(
            f"| {name} | {s['excerpts']} | {s['faults']} | {s['top1']:.0%} | {s['top3']:.0%} | "
            f"{s['named']:.0%} | {s['healthy_false_alarms']} of {s['healthy']} |"
        )
    out += [
        "",
        "What the held-out figures rest on, honestly: the first scoring of the held-out part, "
        "with the rules as committed before it (commit 749f62e), gave top-1 19 of 22 (86%), "
        "top-3 86%, named 86% (below the 90% target) and no healthy false alarm (0 of 4). One "
        "of its three misses was a parser bug (the text before an `NCCL INFO` marker on the same "
        'line was dropped, so `"Duplicate GPU detected ..." from NCCL INFO.` was never read); '
        "fixing it is what moved the figure above, so the current held-out figure is no longer "
        "clean. Earlier, one held-out excerpt (`eks-efa-t4-all-reduce`, the healthy table the "
        "issue names) was run by a whole-job test before the scoring; the parser bug it showed "
        "(network plugin names with spaces, 'via NET/AWS Libfabric/0') was fixed then.",
        "",
        "Held-out excerpts whose first finding is not the thread's cause:",
        "",
    ]
    for r in scores.part("heldout"):
        ok = (r.cause == "healthy" and not r.ranked) or (r.ranked and r.ranked[0] == r.cause)
        if not ok:
            got = ", ".join(r.ranked[:3]) or "nothing above info"
            out.append(f"- `{r.id}` ({r.cause}): {got}")
    out.append("")
    return "\n".join(out)


def doctor_markdown(corpus: Path | None = None) -> str:
    parts = [INTRO, rules_markdown(), messages_markdown(), CI, json_markdown()]
    if corpus is not None:
        parts.append(corpus_markdown(corpus))
    parts += [FORMATS, REST]
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


if __name__ == "__main__":
    sys.stdout.write(doctor_markdown(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
