#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan + UBSan) in build-fuzz/ and runs
# each for SECONDS on a copy of its seed corpus. Exits 1 when a target reports a finding, naming
# the target and its reproducer file. CI (.ci/run) runs it for 30 s a target with the fixed seed 1
# (IGB_FUZZ_SEED), so a CI run is repeatable.
# Usage: scripts/fuzz.sh [seconds]   (default 30; IGB_FUZZ_TARGETS="schedule config" picks targets)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-30}"
BUILD_DIR="${IGB_FUZZ_BUILD_DIR:-build-fuzz}"
TARGETS=(${IGB_FUZZ_TARGETS:-schedule config checkpoint cifar mnist image onnx})

PACKAGES=(clang libclang-rt-14-dev)
scripts/install_packages.sh fuzz "${PACKAGES[@]}"

export CCACHE_DIR="${CCACHE_DIR:-$PWD/.ccache}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DIGB_FUZZ=ON -DIGB_BUILD_TESTS=OFF -DIGB_BUILD_BENCH=OFF
fi
build_targets=(igb_fuzz_make_seeds)
for t in "${TARGETS[@]}"; do build_targets+=("igb_fuzz_$t"); done
cmake --build "$BUILD_DIR" -j "${IGB_JOBS:-2}" --target "${build_targets[@]}"

# Seeds: the committed text inputs, the shipped schedules, and binary inputs written by the
# project's own code (checkpoints, CIFAR, MNIST, images).
WORK="$BUILD_DIR/fuzz"
rm -rf "$WORK/seeds"
"$BUILD_DIR/tests/fuzz/igb_fuzz_make_seeds" "$WORK/seeds" >/dev/null
mkdir -p "$WORK/seeds/schedule" "$WORK/seeds/config"
cp tests/fuzz/corpus/schedule/* schedules/sr/*.yaml "$WORK/seeds/schedule/"
cp tests/fuzz/corpus/config/* "$WORK/seeds/config/"
# ONNX seeds: models of ONNX's own backend tests (Debian's libonnx-testdata, which setup.sh
# installs), a convolution, a pool, a resize, a Gemm and a model of PyTorch's exporter.
mkdir -p "$WORK/seeds/onnx"
for c in node/test_conv_with_strides_padding node/test_maxpool_2d_pads node/test_resize_upsample_sizes_cubic \
    node/test_gemm_default_no_bias pytorch-converted/test_Conv2d_groups simple/test_single_relu_model; do
  src="/usr/share/libonnx-testdata/data/$c/model.onnx"
  if [ -f "$src" ]; then cp "$src" "$WORK/seeds/onnx/$(basename "$c").onnx"; fi
done
printf '\x08\x07' > "$WORK/seeds/onnx/ir_version_only.onnx"

# A leak or a UBSan report stops a target like a crash. The checkpoint target's suppression
# (tests/fuzz/lsan.supp, a leak inside LibTorch) needs full malloc stacks through LibTorch, which
# has no frame pointers; they are slow, so only that target takes them.
ASAN_DEFAULT="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
failed=()
for t in "${TARGETS[@]}"; do
  corpus="$WORK/corpus/$t"
  artifacts="$WORK/artifacts/$t"
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp "$WORK/seeds/$t"/* "$corpus/"
  log="$WORK/$t.log"
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s (log $log)"
  export ASAN_OPTIONS="$ASAN_DEFAULT"
  if [ "$t" = checkpoint ]; then ASAN_OPTIONS="$ASAN_DEFAULT:fast_unwind_on_malloc=0"; fi
  if "$BUILD_DIR/tests/fuzz/igb_fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 \
      -seed="${IGB_FUZZ_SEED:-1}" \
      -rss_limit_mb=4096 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1; then
    grep -E '^(#[0-9]+\s+DONE|Done [0-9]+ runs)' "$log" | tail -2 | sed "s/^/fuzz: $t: /"
  else
    repro=$(ls "$artifacts" 2>/dev/null | head -1)
    echo "fuzz: FINDING in $t: reproducer ${artifacts}/${repro:-(none written)}" >&2
    grep -E 'ERROR: |runtime error|SUMMARY|==ERROR|terminate|what\(\)' "$log" | head -5 >&2 || true
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}; reproduce with $BUILD_DIR/tests/fuzz/igb_fuzz_TARGET FILE" >&2
  exit 1
fi
echo "fuzz: no findings"
