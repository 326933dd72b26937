#!/usr/bin/env bash
# Fails (exit 1) when a C++ source of the repository is not formatted by .clang-format, listing
# each file, or when a function of the project (core data models tools compress runtime deploy
# options apps) is over 80 lines: clang-tidy's readability-function-size (.clang-tidy) on the sources a
# brace scan (scripts/long_blocks.awk) finds a block of over 80 lines in, through the compile
# commands of the build folder (scripts/setup.sh makes it; BUILD_DIR names another).
# Fix the format with: git ls-files '*.h' '*.cpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
for tool in clang-format clang-tidy; do
  if ! command -v "$tool" >/dev/null; then
    echo "check_format: $tool is not installed (scripts/setup.sh installs it)" >&2
    exit 1
  fi
done
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

if [ ! -f "$BUILD_DIR/compile_commands.json" ]; then
  echo "check_format: $BUILD_DIR/compile_commands.json is missing; configure first (scripts/setup.sh)" >&2
  exit 1
fi
mapfile -t sources < <(git ls-files core data models tools compress runtime deploy options apps |
                       grep -E '\.(cpp|h)$')
mapfile -t candidates < <(awk -v limit=80 -f scripts/long_blocks.awk "${sources[@]}")
# A header is checked through a source that includes it.
units=()
for f in "${candidates[@]}"; do
  if [[ "$f" == *.cpp ]]; then
    units+=("$f")
  else
    user=$(git grep -l "#include \"$f\"" -- '*.cpp' | grep -v -E '^(tests|bench)/' | head -n 1 || true)
    [ -n "$user" ] && units+=("$user")
  fi
done
mapfile -t units < <(printf '%s\n' "${units[@]}" | sort -u | sed '/^$/d')
if [ ${#units[@]} -gt 0 ] &&
   ! printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 2 clang-tidy -p "$BUILD_DIR" --quiet \
       > "$BUILD_DIR/clang-tidy.log" 2>&1; then
  grep -E "(warning|error): .*readability-function-size" "$BUILD_DIR/clang-tidy.log" | sort -u >&2 ||
    cat "$BUILD_DIR/clang-tidy.log" >&2
  echo "check_format: functions over 80 lines (split them by meaning; a data table may say" \
       "NOLINT(readability-function-size))" >&2
  exit 1
fi
echo "check_format: no function over 80 lines (clang-tidy on ${#units[@]} of ${#sources[@]} sources)"
