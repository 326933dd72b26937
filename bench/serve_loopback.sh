#!/usr/bin/env bash
# The serving chain against its simulator where the messages cost the most: ResNet-20 (32x32)
# over three igb-serve workers on this machine's loopback, nothing emulated (three devices at this
# machine's speed, links of 10 GB/s). The master probes every hop after configuring (the work a
# message costs, in time and CPU) and the workers report which machine they run on, so the
# simulator counts each message's work and the cores the four processes share. Throughput is
# measured with frames back to back, latency at half the simulated throughput (no queueing),
# both in full and diff mode, each run REPEATS times; prints measured against simulated.
# Usage: bench/serve_loopback.sh [build-dir] [frames] [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
FRAMES="${2:-300}"
REPEATS="${3:-3}"
# shellcheck source=bench/serve_common.sh
source bench/serve_common.sh
cat > "$WORK/devices.yaml" <<'YAML'
devices:
  - {name: a}
  - {name: b}
  - {name: c}
links:
  - {bandwidth_mb_s: 10000}
  - {bandwidth_mb_s: 10000}
YAML
MODEL=(--model resnet20_cifar --input 1x3x32x32)
"$BIN/igb-tools" partition "${MODEL[@]}" --devices "$WORK/devices.yaml" --objective throughput \
  --threads 1 --frames-from "$VIDEO" --out "$WORK/plan" > "$WORK/partition.log"
free_ports 3
for i in 0 1 2; do
  "$BIN/igb-serve" worker --listen "127.0.0.1:${PORTS[$i]}" "${MODEL[@]}" --threads 1 > "$WORK/worker$i.log" 2>&1 &
  PIDS+=($!)
done
WORKERS="127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"
run() {  # mode rate out
  "$BIN/igb-serve" master --plan "$WORK/plan/plan.json" --workers "$WORKERS" --model resnet20_cifar \
    --input "$VIDEO" --frames "$FRAMES" --mode "$1" --rate "$2" --threads 1 --timeout 60 --out "$WORK/$3" > "$WORK/$3.log" 2>&1 ||
    { cat "$WORK/$3.log" >&2; exit 1; }
}
for r in $(seq 1 "$REPEATS"); do
  for mode in full diff; do
    run "$mode" 0 "${mode}_b2b_$r"
    SIM_FPS=$(python3 -c "import json; print(json.load(open('$WORK/${mode}_b2b_$r/serve.json'))['simulated']['throughput_fps'])")
    run "$mode" "$(python3 -c "print(round($SIM_FPS / 2, 3))")" "${mode}_rate_$r"
  done
done
python3 - "$WORK" "$FRAMES" "$REPEATS" <<'PYEOF'
import json, sys
work, frames, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print(f"ResNet-20 at 32x32, {frames} frames of vtest.avi, 3 workers and the master on this machine's loopback")
print(f"{'run':<28} {'measured':>10} {'simulated':>10} {'ratio':>7}")
out = {"bench": "serve_loopback", "frames": frames, "runs": []}
for r in range(1, repeats + 1):
    for mode in ("full", "diff"):
        for kind, what in (("b2b", "throughput_fps"), ("rate", "mean_latency_ms")):
            j = json.load(open(f"{work}/{mode}_{kind}_{r}/serve.json"))
            m, s = j[what], j["simulated"][what]
            label = f"{mode} {'throughput (fps)' if kind == 'b2b' else 'latency (ms)'} #{r}"
            print(f"{label:<28} {m:>10.2f} {s:>10.2f} {m / s:>7.3f}")
            out["runs"].append({"mode": mode, "what": what, "repeat": r, "measured": m,
                                "simulated": s, "ratio": m / s, "hops": j["hops"],
                                "stages": j["stages"]})
hops = json.load(open(f"{work}/full_b2b_1/serve.json"))["hops"]
print(f"{'hop':<70} {'ms/msg':>7} {'ms/MB':>7} {'CPU ms/msg':>10} {'CPU ms/MB':>9}")
for h in hops:
    print(f"{h['from'] + ' -> ' + h['to']:<70} {h['message_ms']:>7.3f} {h['ms_per_mb']:>7.3f} "
          f"{h['cpu_ms']:>10.3f} {h['cpu_ms_per_mb']:>9.3f}")
print(json.dumps(out))
PYEOF
