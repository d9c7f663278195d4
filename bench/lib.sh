# Shared prelude of the bench/ scripts (sourced, never run). It builds the chosen preset and
# names the binaries, and gives the small measuring helpers every script needs.
#
#   source bench/lib.sh
#   kt_build [TARGET...]      install the dependencies, build PRESET (default release); sets B,
#                             KTESIOD, KTCTL, SHIM, PROBE, BENCH
#   kt_workdir NAME           a fresh temporary directory in $work, $sock inside it
#   kt_start_daemon [ARGS]    ktesiod on $work/state and $sock; waits until it answers; $daemon
#                             (run through the command in the array KT_WRAP when it is set)
#   kt_stop_daemon            stop every agent, then the daemon, then any leftover shim
#   kt_wait_settled           until no agent is `starting`
#   kt_metered_agent NAME UPSTREAM [PROBE ARGS...]
#                             register and start an engine-observed probe agent whose calls go
#                             to UPSTREAM; prints its metering proxy URL

kt_build() {
  scripts/install-deps.sh >/dev/null
  PRESET=${PRESET:-release}
  cmake --preset "$PRESET" >/dev/null
  cmake --build --preset "$PRESET" --target "${@:-ktesio-runtime}" >/dev/null
  B=$PWD/build/$PRESET
  KTESIOD=$B/ktesiod/ktesiod
  KTCTL=$B/ktctl/ktctl
  SHIM=$B/ktesiod/shim/ktesio-shim
  PROBE=$B/tests/fixtures/probe/ktesio-probe
  BENCH=$B/bench/ktesio_bench
}

KT_WRAP=()
kt_workdir() {
  work=$(mktemp -d "/tmp/kt-$1-XXXXXX")
  sock=$work/d.sock
}

ctl() { "$KTCTL" --socket "$sock" "$@"; }

# The daemon is started as the packaged unit starts it: with LD_BIND_NOW=1 (without it, it
# re-executes itself once to bind its symbols; docs/operations.md "Memory when idle").
kt_start_daemon() {
  LD_BIND_NOW=1 "${KT_WRAP[@]}" "$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn "$@" \
    2>>"$work/ktesiod.log" &
  daemon=$!
  for _ in $(seq 1 200); do ctl daemon status >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "ktesiod did not answer; its log:" >&2
  cat "$work/ktesiod.log" >&2
  return 1
}

# A stop is refused while an agent is still `starting` (its readiness window): wait that out.
kt_wait_settled() {
  for _ in $(seq 1 200); do
    ctl agent list --json 2>/dev/null | grep -q '"state":"starting"' || return 0
    sleep 0.05
  done
}

kt_stop_daemon() {
  # The daemon must be gone before its agents are killed, or it restarts them (on-failure).
  if [[ -n "${daemon:-}" ]]; then
    kt_wait_settled
    ctl agent stop --all --timeout 2 >/dev/null 2>&1 || true
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true  # returns at once when another process started it
    while kill -0 "$daemon" 2>/dev/null; do sleep 0.02; done
    daemon=
  fi
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
}

kt_metered_agent() {
  local name=$1 upstream=$2
  shift 2
  local args='"--heartbeat-ms", "600000"' arg
  for arg in "$@"; do args="$args, \"$arg\""; done
  mkdir -p "$work/manifests/$name"
  cat >"$work/manifests/$name/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "metered"
[lifecycle.start]
exec = "$PROBE"
args = [$args]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "engine-observed"
[config."metering.base_url"]
env = "OPENAI_BASE_URL"
TOML
  ctl agent register "$name" --manifest "$work/manifests/$name" >/dev/null
  ctl agent config set "$name" metering.upstream_base_url "$upstream" >/dev/null
  ctl agent start "$name" >/dev/null
  ctl agent show "$name" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["proxy_url"])'
}

now_ns() { date +%s%N; }
ms_since() { echo $(( ($(now_ns) - $1) / 1000000 )); }
# Proportional set size (KiB) of one process, and of several.
pss_kb() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
pss_sum_kb() {
  local total=0 p
  for p in "$@"; do total=$((total + $(pss_kb "$p"))); done
  echo "$total"
}
# The per-agent helpers of a daemon whose state is under WORK: the shims of its agents, and the
# shim launcher it forks them from (a child of DAEMON), so that both count in a total.
kt_shim_pids() {  # WORK DAEMON
  pgrep -f "ktesio-shim --run-dir $1" || true
  pgrep -P "$2" -f "ktesio-shim --launcher" || true
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# The median of the numbers on stdin, one per line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "n/a"}'; }
