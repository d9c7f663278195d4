#!/usr/bin/env bash
# Installs what the build needs (apt, only when missing), builds Ktesio, and runs ktesiod in the
# foreground in user mode with its default paths. Once the daemon answers, registers the example
# echo agent (once) so `ktctl agent list` has something to show. Ctrl-C stops the daemon.
#
# From a second shell:  build/release/ktctl/ktctl daemon status
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target ktesiod ktctl ktesio-probe

bin=build/release
export PATH="$PWD/$bin/ktesiod:$PWD/$bin/ktctl:$PWD/$bin/tests/fixtures/probe:$PATH"

"$bin/ktesiod/ktesiod" "$@" &
daemon=$!
trap 'kill -TERM "$daemon" 2>/dev/null; wait "$daemon"; exit 0' INT TERM

for _ in $(seq 1 100); do
  if ktctl daemon status >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 "$daemon" 2>/dev/null; then
    wait "$daemon"
    exit $?
  fi
  sleep 0.1
done

if ! ktctl agent show echo >/dev/null 2>&1; then
  ktctl agent register echo --manifest examples/adapters/echo >/dev/null &&
    echo "run-daemon: registered the example agent 'echo' (examples/adapters/echo)"
fi
cat <<MSG
run-daemon: ktesiod is running (pid $daemon). From a second shell:
  $PWD/$bin/ktctl/ktctl daemon status
  $PWD/$bin/ktctl/ktctl agent list
Ctrl-C stops the daemon.
MSG
wait "$daemon"
