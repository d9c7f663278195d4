#!/usr/bin/env bash
# Regenerates ktesiod/ktesiod.order, the order in which the release build links the daemon's
# functions (docs/benchmarks.md "Function order"): the functions a running daemon uses, in the
# order it first runs them, so that they sit together and the code it never runs is never
# mapped in (the kernel maps code in 64 KiB windows around each page that runs).
#
# It builds ktesiod with -finstrument-functions into build/order (KTESIO_FUNCTION_TRACE, see
# bench/order/function_trace.cc), drives it through what a daemon does in service: boot, a fleet
# of 100 agents applied, started, listed, shown, killed and restarted, paused, configured,
# stopped; logs, events, usage, status and `top`; metered calls through its proxy (JSON and
# streamed); a restart of the daemon that re-adopts running agents. Each run writes the
# functions it entered; the list is the union, in first-seen order, named by `nm`.
#
#   bench/function-order.sh            then rebuild the release preset and commit the list
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
kt_build ktesio-runtime ktesio_proxy_bench
PB=$B/bench/ktesio_proxy_bench
cmake -S . -B build/order -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTESIO_FUNCTION_TRACE=ON \
  >/dev/null
cmake --build build/order -j2 --target ktesiod >/dev/null
KTESIOD=$PWD/build/order/ktesiod/ktesiod
export KTESIO_SHIM=$SHIM
kt_workdir order
upstream=
cleanup() {
  set +e
  kt_stop_daemon
  [[ -n $upstream ]] && kill "$upstream"
  pkill -f "sleep 7$$" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$PB" upstream "$work/port" >/dev/null 2>&1 &
upstream=$!
for _ in $(seq 1 100); do [[ -s $work/port ]] && break; sleep 0.02; done

mkdir -p "$work/kt"
printf '%s\n' 'contract_version = "1.0.0"' '[adapter]' 'kind = "sleep"' '[lifecycle.start]' \
  'exec = "/bin/sleep"' "args = [\"7$$\"]" '[capabilities.pause]' 'linux = "guaranteed"' \
  '[metering]' 'source = "self-reported"' >"$work/kt/sleep.toml"
{
  echo '[fleet]'
  echo 'name = "order"'
  for i in $(seq 1 100); do
    printf '[agents.s-%d]\nmanifest = "kt/sleep.toml"\nlabels = { group = "sleep" }\n' "$i"
    printf '[agents.s-%d.config]\nautostart = true\n"restart.reset_after_ms" = "500"\n' "$i"
  done
} >"$work/fleet.toml"

# Run 1: a fresh state dir, everything an operator and the agents do.
KTESIO_FUNCTION_TRACE=$work/trace-1 kt_start_daemon
proxy=$(kt_metered_agent m "http://127.0.0.1:$(cat "$work/port")/v1" --quiet)
ctl apply -f "$work/fleet.toml" >/dev/null
for round in 1 2 3; do
  ctl agent start --all >/dev/null 2>&1 || true
  kt_wait_settled
  for i in 1 2 3; do
    ctl agent list >/dev/null
    ctl agent list --json >/dev/null
    ctl agent list --selector group=sleep --json >/dev/null
    ctl agent show "s-$i" >/dev/null
    ctl agent show "s-$i" --json >/dev/null
    ctl daemon status >/dev/null
    ctl daemon status --json >/dev/null
  done
  ctl agent logs s-1 --tail 5 >/dev/null 2>&1 || true
  timeout 1 "$KTCTL" --socket "$sock" events --since 0 >/dev/null 2>&1 || true
  ctl agent usage m >/dev/null 2>&1 || true
  ctl agent usage --all --json >/dev/null 2>&1 || true
  ctl agent send m "hello" >/dev/null 2>&1 || true
  ctl diff -f "$work/fleet.toml" >/dev/null 2>&1 || true
  ctl agent config get s-1 >/dev/null 2>&1 || true
  ctl agent config set s-2 restart.reset_after_ms "$((round * 1000))" >/dev/null 2>&1 || true
  for _ in 1 2 3 4 5 6; do pkill -n -f "sleep 7$$" || true; sleep 0.1; done
  ctl agent pause s-3 >/dev/null 2>&1 || true
  ctl agent resume s-3 >/dev/null 2>&1 || true
  ctl agent restart s-4 >/dev/null 2>&1 || true
  "$PB" throughput "$proxy" 8 2 >/dev/null
  "$PB" latency "$proxy" 200 >/dev/null
  ctl top --once >/dev/null 2>&1 || true
  ctl export >/dev/null 2>&1 || true
  ctl secret list >/dev/null 2>&1 || true
  ctl agent stop --selector group=sleep --timeout 5 >/dev/null 2>&1 || true
done
ctl agent start --selector group=sleep >/dev/null 2>&1 || true
kt_wait_settled
# Run 2: the daemon restarted under its running agents (re-adoption), then a few reads.
kill "$daemon"
wait "$daemon" 2>/dev/null || true
daemon=
KTESIO_FUNCTION_TRACE=$work/trace-2 kt_start_daemon
kt_wait_settled
ctl agent list --json >/dev/null
ctl agent show s-1 >/dev/null
"$PB" latency "$proxy" 100 >/dev/null
kt_stop_daemon

# Offsets in first-seen order, run 1 then what run 2 added, named by the instrumented binary;
# only the functions the release binary has (the instrumented build keeps an out-of-line copy of
# every inline function it entered, which the optimised build does not have).
python3 - "$KTESIOD" "$B/ktesiod/ktesiod" "$work/trace-1" "$work/trace-2" \
  >"$work/ktesiod.order" <<'PY'
import subprocess, sys
def functions(binary):
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "TtWw":
            yield int(fields[0], 16), fields[2]
names = {}  # every name at an address: aliases (C1/C2 constructors) share one
for address, name in functions(sys.argv[1]):
    names.setdefault(address, []).append(name)
release = {name for _, name in functions(sys.argv[2])}
seen = []
known = set()
for trace in sys.argv[3:]:
    entries = sorted((int(order), int(offset, 16)) for order, offset in
                     (line.split() for line in open(trace)))
    for _, offset in entries:
        for name in names.get(offset, []):
            if name in release and name not in known:
                known.add(name)
                seen.append(name)
print("\n".join(seen))
PY
# Only a complete list replaces the committed one.
[[ -s $work/ktesiod.order ]] || { echo "function-order: no functions recorded" >&2; exit 1; }
mv "$work/ktesiod.order" ktesiod/ktesiod.order
echo "function-order: $(wc -l <ktesiod/ktesiod.order) functions in ktesiod/ktesiod.order" >&2
