#!/usr/bin/env bash
# Integer inference: igb's INT8 runtime and FP32 inference form vs PyTorch's own paths in the same
# LibTorch build (Debian's python3-torch 1.13.1): TorchScript frozen FP32 and FX post-training INT8
# on the onednn engine. Same models (ResNet-20 32², ResNet-18 224²), batches and thread count; each
# side runs REPS times, alternating, and the medians are compared.
# Usage: bench/int8_peer.sh [build-dir] [threads] [reps] [batches]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
THREADS="${2:-2}"
REPS="${3:-3}"
BATCHES="${4:-1,16}"
scripts/install_packages.sh int8_peer python3-torch
[ -x "$BUILD_DIR/bench/igb_bench_inference_latency" ] ||
  cmake --build "$BUILD_DIR" --target igb_bench_inference_latency -j 2
ours=(); theirs=()
for _ in $(seq "$REPS"); do
  ours+=("$("$BUILD_DIR/bench/igb_bench_inference_latency" --models resnet20_cifar,resnet18 \
    --batches "$BATCHES" --threads "$THREADS" --igb-int8 --no-onnxruntime --thinned "" | tail -n 1)")
  theirs+=("$(/usr/bin/python3 bench/int8_peer.py --batches "$BATCHES" --threads "$THREADS" 2>/dev/null)")
done
/usr/bin/python3 - "${ours[@]}" "${theirs[@]}" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
n = len(runs) // 2
def med(rs, model, batch, key):
    return statistics.median(r[key] for run in rs for r in run["rows"]
                             if r["model"] == model and r["batch"] == batch)
print(f"{n} alternating runs per side, {runs[0]['threads']} threads, medians (ms)")
print("| model | batch | igb FP32 form | igb INT8 | igb ratio | torch frozen FP32 | torch INT8 (onednn) "
      "| torch ratio | torch INT8 / igb INT8 | torch FP32 / igb INT8 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in runs[0]["rows"]:
    m, b = r["model"], r["batch"]
    f, i = med(runs[:n], m, b, "inference_form_ms"), med(runs[:n], m, b, "igb_int8_ms")
    tf, ti = med(runs[n:], m, b, "torch_fp32_ms"), med(runs[n:], m, b, "torch_int8_ms")
    print(f"| {m} | {b} | {f:.2f} | {i:.2f} | {f / i:.2f} | {tf:.2f} | {ti:.2f} | {tf / ti:.2f} "
          f"| {ti / i:.2f} | {tf / i:.2f} |")
PYEOF
