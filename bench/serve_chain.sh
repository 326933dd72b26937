#!/usr/bin/env bash
# The serving chain against its simulator: frames of a real video (Debian's opencv-doc ships
# vtest.avi, a street scene) through three igb-serve workers on this machine whose links are
# and compute speeds are emulated as bench/serve_chain_devices.yaml has them. Plans ResNet-18 at
# 112x112 with igb-tools partition (throughput objective), then runs the master back to back
# (throughput) and at half the simulated rate (latency without queueing), in full and diff mode,
# and prints measured against simulated and the bytes each link carried. Workers and master each
# use one thread.
# Usage: bench/serve_chain.sh [build-dir] [frames]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
FRAMES="${2:-120}"
# shellcheck source=bench/serve_common.sh
source bench/serve_common.sh
MODEL=(--model resnet18 --input 1x3x224x224)
"$BIN/igb-tools" partition "${MODEL[@]}" --devices bench/serve_chain_devices.yaml \
  --objective throughput --threads 1 --frames-from "$VIDEO" --out "$WORK/plan" > "$WORK/partition.log"
free_ports 3
LINKS=("--compute-speed 0.5 --link-bandwidth 2.5 --link-latency 2"
       "--compute-speed 0.5 --link-bandwidth 2.5 --link-latency 5" "")
for i in 0 1 2; do
  # shellcheck disable=SC2086
  "$BIN/igb-serve" worker --listen "127.0.0.1:${PORTS[$i]}" "${MODEL[@]}" --threads 1 ${LINKS[$i]} > "$WORK/worker$i.log" 2>&1 &
  PIDS+=($!)
done
WORKERS="127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"
run() {  # mode rate out [transfer]
  "$BIN/igb-serve" master --transfer "${4:-fp32}" --plan "$WORK/plan/plan.json" --workers "$WORKERS" --model resnet18 \
    --input "$VIDEO" --frames "$FRAMES" --mode "$1" --rate "$2" --threads 1 --timeout 60 --out "$WORK/$3" > "$WORK/$3.log" 2>&1 ||
    { cat "$WORK/$3.log" >&2; exit 1; }
}
run full 0 full_b2b
SIM_FPS=$(python3 -c "import json; print(json.load(open('$WORK/full_b2b/serve.json'))['simulated']['throughput_fps'])")
RATE=$(python3 -c "print(round($SIM_FPS / 2, 3))")
run full "$RATE" full_rate
run diff 0 diff_b2b
run diff "$RATE" diff_rate
# INT8 transfers: a difference under half a quantization step is not sent, so the differences of
# a video are sparse where fp32's are not (docs/serving.md#modes).
run full 0 int8_full_b2b int8
run diff 0 int8_diff_b2b int8
python3 - "$WORK" "$FRAMES" "$RATE" <<'PYEOF'
import json, sys
work, frames, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = []
print(f"ResNet-18 at 224x224, {frames} frames of vtest.avi, 3 workers (speeds 0.5, 0.5, 1), links 2.5 MB/s + 2 ms and + 5 ms")
print(f"{'run':<22} {'measured':>10} {'simulated':>10} {'ratio':>7}")
out = {"bench": "serve_chain", "frames": frames, "rate_fps": rate, "runs": {}}
for name, what in (("full_b2b", "throughput_fps"), ("full_rate", "mean_latency_ms"),
                   ("diff_b2b", "throughput_fps"), ("diff_rate", "mean_latency_ms")):
    j = json.load(open(f"{work}/{name}/serve.json"))
    m, s = j[what], j["simulated"][what]
    label = f"{name.split('_')[0]} {'throughput (fps)' if what == 'throughput_fps' else 'latency (ms)'}"
    print(f"{label:<22} {m:>10.2f} {s:>10.2f} {m / s:>7.3f}")
    out["runs"][name] = {"measured": m, "simulated": s, "ratio": m / s,
                         "mean_latency_ms": j["mean_latency_ms"], "throughput_fps": j["throughput_fps"],
                         "stages": j["stages"]}
print(f"{'link into stage':<16} {'transfer':>8} {'full B/frame':>14} {'diff B/frame':>14} {'diff/full':>10}")
out["bytes"] = []
for precision, prefix in (("fp32", ""), ("int8", "int8_")):
    full = json.load(open(f"{work}/{prefix}full_b2b/serve.json"))
    diff = json.load(open(f"{work}/{prefix}diff_b2b/serve.json"))
    for f, d in zip(full["stages"], diff["stages"]):
        fb, db = f["bytes_in_later"] / max(frames - 1, 1), d["bytes_in_later"] / max(frames - 1, 1)
        print(f"{f['stage']:<16} {precision:>8} {fb:>14.0f} {db:>14.0f} {db / fb:>10.3f}")
        out["bytes"].append({"stage": f["stage"], "transfer": precision, "full": fb, "diff": db})
    if prefix:
        print(f"int8 throughput (fps): full {full['throughput_fps']:.2f} (simulated "
              f"{full['simulated']['throughput_fps']:.2f}), diff {diff['throughput_fps']:.2f} "
              f"(simulated {diff['simulated']['throughput_fps']:.2f})")
print(json.dumps(out))
PYEOF
