#!/usr/bin/env bash
# Installs what the build needs (apt, only when missing), builds what the daemon needs at run
# time (the `ktesio-runtime` target: daemon, shim, ktctl, the example agent's fixture), and runs
# ktesiod in the foreground in user mode with its default paths. Once the daemon answers,
# registers the example echo agent (once) so `ktctl agent list` has something to show.
# Ctrl-C stops the daemon.
#
#   scripts/run-daemon.sh [ktesiod flags]   the README's first command
#   scripts/run-daemon.sh --check           the same build, then a private daemon (temp state
#                                           dir and socket) that must start the example agent,
#                                           echo a line back and stop; non-zero otherwise. CI
#                                           runs it on a clean clone.
#
# From a second shell:  build/release/ktctl/ktctl daemon status
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target ktesio-runtime

bin=build/release
export PATH="$PWD/$bin/ktesiod:$PWD/$bin/ktctl:$PWD/$bin/tests/fixtures/probe:$PATH"

daemon_args=("$@")
if ((check)); then
  scratch=$(mktemp -d /tmp/kt-check.XXXXXX)
  daemon_args+=(--state-dir "$scratch/state" --socket "$scratch/ktesiod.sock")
  export KTESIO_SOCKET="$scratch/ktesiod.sock"
fi

# Bound at exec, as the packaged unit starts it (otherwise the daemon re-executes itself once).
LD_BIND_NOW=1 "$bin/ktesiod/ktesiod" "${daemon_args[@]}" &
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

if ((check)); then
  trap - INT TERM
  failed=0
  fail() {
    echo "run-daemon --check: FAILED: $*" >&2
    failed=1
  }
  status=$(ktctl daemon status) || fail "daemon status"
  echo "$status"
  if grep -q degraded <<<"$status"; then
    fail "the daemon reports itself degraded"
  fi
  ktctl agent start echo || fail "agent start echo"
  state=$(ktctl agent show echo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["state"])')
  [[ "$state" == running ]] || fail "echo is '$state', not running"
  ktctl agent send echo "hello from run-daemon --check" || fail "agent send"
  seen=0
  for _ in $(seq 1 50); do
    if ktctl agent logs echo | grep -q "hello from run-daemon --check"; then
      seen=1
      break
    fi
    sleep 0.1
  done
  ((seen)) || fail "the example agent did not echo the line back"
  ktctl agent stop echo >/dev/null || fail "agent stop echo"
  kill -TERM "$daemon"
  wait "$daemon" || fail "ktesiod exited non-zero"
  rm -rf "$scratch"
  if ((failed)); then
    exit 1
  fi
  echo "run-daemon --check: ok (the example agent started, echoed a line and stopped)"
  exit 0
fi

cat <<MSG
run-daemon: ktesiod is running (pid $daemon). From a second shell:
  $PWD/$bin/ktctl/ktctl daemon status
  $PWD/$bin/ktctl/ktctl agent list
Ctrl-C stops the daemon.
MSG
wait "$daemon"
