#!/usr/bin/env bash
# Training throughput: igb's C++ loop vs the same ResNet-20 loop in PyTorch's Python API (Debian's
# python3-torch, the same 1.13.1 build), same batch and thread count, in one run.
# Each side runs REPS times, alternating, and the medians are compared (this machine's timing noise
# is several percent from run to run).
# Usage: bench/train_speed.sh [build-dir] [threads] [steps] [reps] [batch]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
THREADS="${2:-$(nproc)}"
STEPS="${3:-30}"
REPS="${4:-3}"
BATCH="${5:-128}"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-torch
fi
[ -x "$BUILD_DIR/bench/igb_bench_train_speed" ] || cmake --build "$BUILD_DIR" --target igb_bench_train_speed -j 2
PY=python3
# Debian's python3-torch lives in the system interpreter; prefer it when another python3 is first on PATH.
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null && PY=/usr/bin/python3

ours=(); theirs=()
for _ in $(seq "$REPS"); do
  ours+=("$("$BUILD_DIR/bench/igb_bench_train_speed" --threads "$THREADS" --steps "$STEPS" --batch "$BATCH")")
  theirs+=("$($PY bench/train_speed.py --threads "$THREADS" --steps "$STEPS" --batch "$BATCH")")
done
$PY - "${ours[@]}" "${theirs[@]}" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
n = len(runs) // 2
def med(rs, k): return statistics.median(r[k] for r in rs)
a = dict(runs[0], images_per_s=med(runs[:n], "images_per_s"), peak_rss_mb=med(runs[:n], "peak_rss_mb"))
b = dict(runs[n], images_per_s=med(runs[n:], "images_per_s"), peak_rss_mb=med(runs[n:], "peak_rss_mb"))
print(f"{'impl':<16} {'images/s (median of ' + str(n) + ')':>26} {'peak RSS (MB)':>14}")
for r in (a, b):
    print(f"{r['impl']:<16} {r['images_per_s']:>26.1f} {r['peak_rss_mb']:>14.1f}")
ratio = a["images_per_s"] / b["images_per_s"]
mem = a["peak_rss_mb"] / b["peak_rss_mb"]
print(f"throughput ratio igb/python: {ratio:.3f}   memory ratio igb/python: {mem:.3f}")
print(json.dumps({"bench": "train_speed", "model": a["model"], "batch": a["batch"], "threads": a["threads"],
                  "reps": n, "igb_images_per_s": a["images_per_s"], "python_images_per_s": b["images_per_s"],
                  "throughput_ratio": ratio, "igb_peak_rss_mb": a["peak_rss_mb"],
                  "python_peak_rss_mb": b["peak_rss_mb"], "memory_ratio": mem}))
PYEOF
