#!/usr/bin/env bash
# Builds the test suite under AddressSanitizer and UndefinedBehaviorSanitizer in build-sanitize/
# and runs it; any sanitizer report fails its test. Then builds the fuzz targets (ASan + UBSan,
# build-fuzz/) and runs the checkpoint target from its seeds, the forged checkpoints among them
# (records short, empty or missing under recomputed checksums), for IGB_SANITIZE_FUZZ_SECONDS
# (default 60). Not part of every CI run: see docs/reliability.md for what it costs.
# Usage: scripts/sanitize.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${IGB_SANITIZE_BUILD_DIR:-build-sanitize}"
# clang (setup.sh's compiler) keeps its sanitizer runtimes in a package of their own.
scripts/install_packages.sh sanitize clang libclang-rt-14-dev
IGB_CMAKE_ARGS="-DIGB_SANITIZE=address,undefined -DIGB_BUILD_BENCH=OFF" scripts/setup.sh "$BUILD_DIR"
# The ONNX tests compare with onnxruntime, as in scripts/test.sh.
scripts/install_onnxruntime.sh > /dev/null
# Leaks inside system libraries (LibTorch, Fontconfig, Graphviz) are suppressed: tests/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# A failing test does not skip the fuzzing: both run, and either failing fails the script.
suite=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j 2 "$@") || suite=$?
# The fuzz targets take their own sanitizer options (scripts/fuzz.sh).
fuzz=0
env -u ASAN_OPTIONS -u LSAN_OPTIONS -u UBSAN_OPTIONS IGB_FUZZ_TARGETS=checkpoint \
  scripts/fuzz.sh "${IGB_SANITIZE_FUZZ_SECONDS:-60}" || fuzz=$?
if [ "$suite" -ne 0 ] || [ "$fuzz" -ne 0 ]; then
  echo "sanitize: the suite exited with $suite, the checkpoint fuzzing with $fuzz" >&2
  exit 1
fi
