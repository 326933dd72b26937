#!/usr/bin/env bash
# Sets up, builds everything and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
scripts/check_format.sh
# The ONNX export tests compare LibTorch with onnxruntime (Node.js and onnxruntime-node from npm).
scripts/install_onnxruntime.sh > /dev/null
cd build
ctest --output-on-failure -j 2 "$@"
