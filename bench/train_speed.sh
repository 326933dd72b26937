#!/usr/bin/env bash
# Training throughput: igb's C++ loop vs the same ResNet-20 loop in PyTorch's Python API (Debian's
# python3-torch, the same 1.13.1 build), same batch and thread count, in one run.
# Usage: bench/train_speed.sh [build-dir] [threads] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
THREADS="${2:-$(nproc)}"
STEPS="${3:-30}"
if ! python3 -c "import torch" 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-torch
fi
[ -x "$BUILD_DIR/bench/igb_bench_train_speed" ] || cmake --build "$BUILD_DIR" --target igb_bench_train_speed -j 2
PY=python3
# Debian's python3-torch lives in the system interpreter; prefer it when another python3 is first on PATH.
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null && PY=/usr/bin/python3

ours=$("$BUILD_DIR/bench/igb_bench_train_speed" --threads "$THREADS" --steps "$STEPS")
theirs=$($PY bench/train_speed.py --threads "$THREADS" --steps "$STEPS")
$PY - "$ours" "$theirs" <<'PYEOF'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{'impl':<16} {'images/s':>10} {'peak RSS (MB)':>14}")
for r in (a, b):
    print(f"{r['impl']:<16} {r['images_per_s']:>10.1f} {r['peak_rss_mb']:>14.1f}")
ratio = a["images_per_s"] / b["images_per_s"]
mem = a["peak_rss_mb"] / b["peak_rss_mb"]
print(f"throughput ratio igb/python: {ratio:.3f}   memory ratio igb/python: {mem:.3f}")
print(json.dumps({"bench": "train_speed", "model": a["model"], "batch": a["batch"], "threads": a["threads"],
                  "igb_images_per_s": a["images_per_s"], "python_images_per_s": b["images_per_s"],
                  "throughput_ratio": ratio, "igb_peak_rss_mb": a["peak_rss_mb"],
                  "python_peak_rss_mb": b["peak_rss_mb"], "memory_ratio": mem}))
PYEOF
