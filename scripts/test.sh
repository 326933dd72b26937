#!/usr/bin/env bash
# Sets up, builds everything and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
scripts/check_format.sh
cd build
ctest --output-on-failure -j 2 "$@"
