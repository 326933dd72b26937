#!/usr/bin/env bash
# Fails (exit 1) when a C++ source of the repository is not formatted by .clang-format, listing
# each file. Fix with: git ls-files '*.h' '*.cpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.h' '*.cpp')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted by .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix with: git ls-files '*.h' '*.cpp' | xargs clang-format -i" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ files formatted"
