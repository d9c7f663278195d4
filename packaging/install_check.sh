#!/usr/bin/env bash
# Installs the build into a scratch prefix (`cmake --install`) and runs the INSTALLED tree: the
# daemon finds its shim next to itself, ktctl drives it, an example agent starts and stops, and
# the service files and docs are where the units say. Usage: install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d /tmp/kt-inst-XXXXXX)
daemon=
cleanup() {
  [[ -n "$daemon" ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  pkill -9 -f "$work/usr/bin/ktesio-shim" 2>/dev/null || true
  pkill -9 -f "$work/usr/bin/ktesio-probe" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/usr" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }
for f in bin/ktesiod bin/ktctl bin/ktesio-shim bin/ktesio-tck bin/ktesio-probe \
         lib/systemd/system/ktesiod.service lib/systemd/system/ktesiod.socket \
         lib/systemd/system/ktesio-agents.service \
         lib/sysusers.d/ktesio.conf lib/tmpfiles.d/ktesio.conf \
         share/doc/ktesio/operations.md share/doc/ktesio/metering.md \
         share/ktesio/proto/ktesio/v1/agent.proto share/ktesio/examples/adapters/echo/adapter.toml \
         share/man/man1/ktctl.1 share/man/man8/ktesiod.8 \
         share/bash-completion/completions/ktctl share/zsh/vendor-completions/_ktctl \
         share/fish/vendor_completions.d/ktctl.fish; do
  [[ -e "$work/usr/$f" ]] || fail "missing $f"
done
"$work/usr/bin/ktesiod" --version >/dev/null || fail "installed ktesiod --version failed"
"$work/usr/bin/ktctl" --version >/dev/null 2>&1 || true  # names the daemon when reachable

sock=$work/d.sock
PATH="$work/usr/bin:/usr/bin:/bin" "$work/usr/bin/ktesiod" --state-dir "$work/state" \
  --socket "$sock" 2>"$work/daemon.log" &
daemon=$!
ctl() { "$work/usr/bin/ktctl" --socket "$sock" "$@"; }
for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done
ctl daemon status >/dev/null || { cat "$work/daemon.log" >&2; fail "installed daemon unreachable"; }
ctl agent register echo --manifest "$work/usr/share/ktesio/examples/adapters/echo" >/dev/null ||
  fail "register from the installed example failed"
ctl agent start echo >/dev/null || { cat "$work/daemon.log" >&2; fail "start failed"; }
ctl agent send echo "installed tree works" >/dev/null
for _ in $(seq 1 100); do
  ctl agent logs echo | grep -q "installed tree works" && break
  sleep 0.05
done
ctl agent logs echo | grep -q "installed tree works" || fail "echo agent did not answer"
# (the shim of an agent: forked by the launcher, `ktesio-shim --launcher`, or exec'd)
commands=$(for cmdline in /proc/[0-9]*/cmdline; do
  tr '\0' ' ' <"$cmdline" 2>/dev/null || true
  echo
done)
grep -q "^$work/usr/bin/ktesio-shim --run-dir " <<<"$commands" ||
  fail "the agent does not run under the installed shim"
ctl agent stop echo >/dev/null || fail "stop failed"
echo "install: the installed tree runs (daemon, shim, ktctl, example agent, units, docs)"
