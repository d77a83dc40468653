#!/usr/bin/env bash
# First-GPU check (a few minutes): on a CUDA machine, record the evidence bandwall reads and
# run bandwall on it, everything in one folder.
#
#   1. bandwall probe                      -> probe.json
#   2. NCCL collectives over all local GPUs, NCCL_DEBUG=INFO (INIT,GRAPH,NET) captured
#                                          -> collectives.txt, nccl-debug/*.log
#   3. a profiled DDP training step (torch.profiler, one trace per GPU)
#                                          -> traces/trace-rankN.json, train.json
#   4. bandwall doctor on 2+3, calibrate + validate on the collectives run
#                                          -> doctor.txt, doctor.json, doctor.html,
#                                             calibrate.json, validate.json
#
# Usage: benchmarks/gpu_check.sh [OUT_DIR]     (exit 3 without a CUDA GPU)
# Env:   SIZES (default 1M:1G), MODEL (default gpt-tiny), STEPS (default 5)
set -euo pipefail

OUT=${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}
SIZES=${SIZES:-1M:1G}
MODEL=${MODEL:-gpt-tiny}
STEPS=${STEPS:-5}
PY=${PYTHON:-python}
mkdir -p "$OUT/nccl-debug" "$OUT/traces"
OUT=$(cd "$OUT" && pwd)
export BANDWALL_DB="$OUT/results.db"
export BANDWALL_PROFILE_DIR="$OUT/profiles"

NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
if [ "$NGPU" -lt 1 ]; then
    echo "gpu_check: no CUDA GPU visible; nothing to check" >&2
    exit 3
fi
echo "gpu_check: $NGPU GPU(s), writing to $OUT"

# `bandwall doctor` once it is registered in the CLI; the command function directly before.
doctor() {
    if bandwall doctor --help >/dev/null 2>&1; then
        bandwall doctor "$@"
    else
        "$PY" -c 'import sys, typer
from bandwall.cli.doctor import doctor
app = typer.Typer(); app.command("doctor")(doctor); app.command("_")(lambda: None)
app(sys.argv[1:], prog_name="bandwall")' doctor "$@"
    fi
}

step() { echo "gpu_check: $*"; }

step "1/4 probe"
bandwall probe --json > "$OUT/probe.json"

step "2/4 collectives over $NGPU GPU(s), sizes $SIZES, NCCL debug log captured"
# one debug file per process (%h host, %p pid): NCCL's own prefixes stay on every line
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET NCCL_DEBUG_FILE="$OUT/nccl-debug/nccl.%h.%p.log" \
    bandwall bench collectives --local "$NGPU" --ops all_reduce,all_gather --sizes "$SIZES" \
    --iters 10 --warmup 3 > "$OUT/collectives.txt"
RUN=$(bandwall results list --json | "$PY" -c \
    'import json, sys; print(max(r["id"] for r in json.load(sys.stdin) if r["kind"] == "collectives"))')

step "3/4 profiled training step ($MODEL, $STEPS recorded steps)"
NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$OUT/nccl-debug/train.%h.%p.log" \
    "$PY" -m bandwall.measure.doctor.profile --local "$NGPU" --model "$MODEL" \
    --steps "$STEPS" --out "$OUT/traces" > /dev/null
bandwall bench train --local "$NGPU" --model "$MODEL" --json > "$OUT/train.json"

step "4/4 doctor, calibrate, validate"
doctor "$OUT/nccl-debug" "$OUT/collectives.txt" "$OUT/traces" --html "$OUT/doctor.html" \
    > "$OUT/doctor.txt" 2> "$OUT/doctor.notes.txt" || true
doctor "$OUT/nccl-debug" "$OUT/collectives.txt" "$OUT/traces" --json --fail-on never > "$OUT/doctor.json"
bandwall calibrate "$RUN" --name gpucheck --json > "$OUT/calibrate.json"
bandwall validate "$RUN" --fabric measured:gpucheck --json > "$OUT/validate.json"

"$PY" - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
d = json.load(open(f"{out}/doctor.json"))
v = json.load(open(f"{out}/validate.json"))["summary"]
print("doctor findings:", ", ".join(f"{f['code']} ({f['severity']})" for f in d["findings"]) or "none")
for log in d["nccl_logs"][:1]:
    print("transport:", log["describe"])
if d["trace"]:
    t = d["trace"]
    print(f"trace: step {t['step_s'] * 1e3:.1f} ms, exposed comm {t['exposed_share']:.1%}")
print(f"validate: median |error| {v['median_abs_error']:.1%} over {v['rows']} rows")
EOF
echo "gpu_check: done, see $OUT"
