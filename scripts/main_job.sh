#!/usr/bin/env bash
# The main job: set up, train FSRCNN x3 on the photographs of opencv-doc under the AGP pruning
# schedule schedules/sr/fsrcnn_agp.yaml, test the best checkpoint on the held-out photographs and
# the synthetic images, and print the summary
# (PSNR next to the reached sparsity).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
OUT="${OUT:-runs/main_job}"
build/apps/igb-train --optform=sr --compress schedules/sr/fsrcnn_agp.yaml --out "$OUT" "$@"
build/apps/igb-test --optform=sr --checkpoint "$OUT/best.ckpt" --save-images "$OUT/images"
echo
echo "== $OUT/summary.json"
cat "$OUT/summary.json"
