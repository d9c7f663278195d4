#!/usr/bin/env bash
# Fails when a tracked C++ source is not formatted per .clang-format (clang-format 14).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || scripts/install-deps.sh
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.proto' | grep -v '^tests/fuzz/corpus/')
bad=()
for f in "${files[@]}"; do
  if ! clang-format --style=file "$f" | cmp -s - "$f"; then
    bad+=("$f")
  fi
done
if ((${#bad[@]})); then
  printf 'not clang-formatted (run scripts/format.sh):\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files clean"
