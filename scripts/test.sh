#!/usr/bin/env bash
# Installs what the build needs (apt, only when missing), builds, and runs the whole test suite.
# Exits non-zero on any failure.
#
#   scripts/test.sh            the `dev` preset (Debug, warnings as errors)
#   scripts/test.sh --asan     the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer)
#   scripts/test.sh --release  the `release` preset
set -euo pipefail
cd "$(dirname "$0")/.."

preset=dev
case "${1:-}" in
  "") ;;
  --asan) preset=asan ;;
  --release) preset=release ;;
  *) echo "usage: scripts/test.sh [--asan|--release]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
scripts/install-agents.sh  # real agents for tests/e2e (skipped, with the reason, when unreachable)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --preset "$preset" -j2 --timeout 600
