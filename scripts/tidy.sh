#!/usr/bin/env bash
# clang-tidy 14 with the checked-in .clang-tidy over every production source file,
# against build/dev's compile database (configured and the generated headers built first when
# missing). Any finding fails the script (WarningsAsErrors). Run by CI after the test suite.
#
#   scripts/tidy.sh                  TIDY_FILES='ktesiod/store/' scripts/tidy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v run-clang-tidy-14 >/dev/null || scripts/install-deps.sh
# Every translation unit of the project (tests aside): libcontract, the daemon, ktctl and the
# kit; .clang-tidy also turns on clang's lock analysis (-Wthread-safety) for them.
default='(libcontract/|ktesiod/|ktctl/|tck/)'
files=${TIDY_FILES:-$default}
if [[ ! -f build/dev/compile_commands.json ]]; then
  cmake --preset dev >/dev/null
fi
cmake --build build/dev --target ktesio_proto >/dev/null  # the generated headers they include
start=$(date +%s)
set +e
out=$(run-clang-tidy-14 -p build/dev -j "$(nproc)" -quiet "$PWD/$files" 2>&1)
rc=$?
set -e
findings=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out" | grep -E '^/.*: (warning|error): ' | sort -u || true)
checked=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out" | grep -c '^clang-tidy-14 ' || true)
if [[ -n $findings || $rc -ne 0 ]]; then
  echo "$findings" >&2
  [[ -n $findings ]] || echo "$out" | tail -20 >&2
  echo "tidy: findings in $files (exit $rc)" >&2
  exit 1
fi
echo "tidy: $checked files clean in $(( $(date +%s) - start )) s"
