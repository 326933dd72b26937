#!/usr/bin/env bash
# Installs the Debian packages igb builds with (only those missing), then configures and builds.
# Usage: scripts/setup.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(
  build-essential clang cmake ninja-build ccache pkg-config clang-format clang-tidy
  libtorch-dev libyaml-cpp-dev libonnx-dev libopencv-dev libjpeg-dev libpng-dev libcli11-dev
  libgraphviz-dev graphviz libcairo2-dev libexpat1-dev libgtest-dev libgmock-dev libgloo-dev
  # igb-serve: gRPC and the protocol compiler with its C++ plugin; openssl makes the tests' and the
  # docs' TLS certificates; iproute2's ip makes the network namespaces the serving tests' hosts are.
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc openssl iproute2
  nlohmann-json3-dev libfmt-dev
  # The inference runtime calls oneDNN directly: the headers of the 2.6.3 library LibTorch links.
  # Its CMake package looks for OpenCL (headers and loader) even for a CPU-only build.
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  # LibTorch falls back to BLAS for linear layers and small-batch convolutions; without an
  # optimised BLAS, Debian links the reference one (9x slower on ResNet-20 at batch 1). The
  # OpenMP build shares LibTorch's threads instead of competing with them.
  libopenblas0-openmp
  # Real material: the photographs, handwritten digits and videos of OpenCV's samples
  # (--data photos, --data digits, video frames; data/opencv_samples.h).
  opencv-doc
  # PyTorch's Python API, the same 1.13.1 build as libtorch-dev: the tests script and trace models
  # with it to import them (docs/byo-model.md), the benchmarks run their peer loops in it.
  python3-torch
  # torchvision's classifiers, exported to ONNX by the importer's tests (docs/onnx-import.md).
  python3-torchvision
  # ONNX's own backend tests (node/, pytorch-converted/, ...), the same 1.12 as libonnx-dev: the
  # conformance suite of the ONNX importer (docs/onnx-import.md).
  libonnx-testdata
)

scripts/install_packages.sh setup "${PACKAGES[@]}"

# Keep the compiler cache inside the project so repeated builds (and CI re-runs) reuse it.
export CCACHE_DIR="${CCACHE_DIR:-$PWD/.ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # IGB_CMAKE_ARGS adds configure options for a new build folder (scripts/sanitize.sh uses it).
  # Clang by default: with the precompiled header's templates instantiated once (CMake's
  # PCH_INSTANTIATE_TEMPLATES) a LibTorch source compiles 2-3x faster than with GCC
  # (docs/building.md, Build times). CC and CXX pick another compiler for a new folder.
  # shellcheck disable=SC2086
  CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGB_BUILD_TESTS=ON \
    ${IGB_CMAKE_ARGS:-}
fi
# Two jobs: each LibTorch translation unit needs about 1 GB and the machine has two cores.
cmake --build "$BUILD_DIR" -j "${IGB_JOBS:-2}" "${@:2}"
