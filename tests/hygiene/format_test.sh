#!/usr/bin/env bash
# Every tracked C++ / CUDA file is formatted as the repo's .clang-format says (clang-format 14, the
# version scripts/setup installs; another version formats differently, so the test skips there).
# Fix with: git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format-14 -i
set -uo pipefail
src=${1:?usage: format_test.sh SOURCE_DIR}
cd "$src" || exit 1
command -v git >/dev/null || { echo "SKIP: git is not on PATH"; exit 77; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: $src is not a git checkout"; exit 77; }
fmt=$(command -v clang-format-14 || true)
[ -n "$fmt" ] || { echo "SKIP: clang-format-14 is not installed (scripts/setup installs it)"; exit 77; }
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
[ ${#files[@]} -gt 0 ] || { echo "FAIL: no C++ files found under $src"; exit 1; }
bad=()
for f in "${files[@]}"; do
  "$fmt" --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "FAIL: ${#bad[@]} of ${#files[@]} files differ from .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: $fmt -i ${bad[*]}"
  exit 1
fi
echo "PASS: ${#files[@]} files formatted"
