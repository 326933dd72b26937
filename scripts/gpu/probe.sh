#!/usr/bin/env bash
# What a machine offers for building igb against a LibTorch with CUDA (docs/gpu.md): the GPU, the
# Python PyTorch and the LibTorch inside it (version, CUDA, C++ ABI, CMake prefix), the LibTorch
# headers the default build finds, the compiler and build tools, and each library the project
# builds with (found or missing). Runs anywhere, GPU or not; prints one "key: value" line each and
# always exits 0.
# Usage: scripts/gpu/probe.sh [python]
set -uo pipefail
PY="${1:-}"
if [ -z "$PY" ]; then
  # The first Python with torch: PATH's, then Debian's.
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" > /dev/null 2>&1 && "$candidate" -c "import torch" 2> /dev/null; then
      PY="$candidate"
      break
    fi
  done
fi
say() { printf '%s: %s\n' "$1" "$2"; }

if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  say gpu "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
  say gpu_count "$(nvidia-smi -L | wc -l)"
else
  say gpu none
  say gpu_count 0
fi

if [ -n "$PY" ]; then
  "$PY" - <<'PYEOF'
import torch, torch.utils
print("python_torch:", torch.__version__)
print("python_torch_cuda:", torch.version.cuda or "none")
print("python_torch_cuda_available:", "yes" if torch.cuda.is_available() else "no")
print("python_torch_bf16:", "yes" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no")
print("python_torch_cmake_prefix:", torch.utils.cmake_prefix_path)
print("python_torch_cxx11_abi:", "yes" if torch._C._GLIBCXX_USE_CXX11_ABI else "no")
print("python_torch_nccl:", "yes" if torch.cuda.is_available() and torch.distributed.is_nccl_available() else "no")
PYEOF
else
  say python_torch none
fi

# The LibTorch the default build (Debian's) compiles against.
version_h=/usr/include/torch/csrc/api/include/torch/version.h
if [ -f "$version_h" ]; then
  say libtorch_headers "$(awk '/define TORCH_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v == "" ? "" : ".") $3} END {print v}' "$version_h")"
else
  say libtorch_headers none
fi
say glibc "$(ldd --version 2> /dev/null | head -1 | awk '{print $NF}')"
for tool in c++ cmake ninja ccache; do
  if command -v "$tool" > /dev/null 2>&1; then
    say "$tool" "$("$tool" --version 2> /dev/null | head -1)"
  else
    say "$tool" missing
  fi
done

# The libraries of the project's build, as headers where the compiler looks by default.
found() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
for pair in yaml-cpp:yaml-cpp/yaml.h cli11:CLI/CLI.hpp nlohmann-json:nlohmann/json.hpp \
            gtest:gtest/gtest.h opencv:opencv4/opencv2/core.hpp grpc:grpcpp/grpcpp.h \
            protobuf:google/protobuf/message.h expat:expat.h zlib:zlib.h; do
  if found "${pair#*:}"; then say "dep_${pair%%:*}" found; else say "dep_${pair%%:*}" missing; fi
done
exit 0
