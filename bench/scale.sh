#!/usr/bin/env bash
# The scale curve (docs/benchmarks.md "Scale curve"): for each agent count in SIZES, a fresh
# release daemon and that many `sleep` agents, measuring
#
#   register_s      `ktctl apply` of a fleet file declaring them (registered, not started)
#   start_all_s     `ktctl agent start --all` -> every agent process exists
#   list_ms         `ktctl agent list --json`, whole process (median of 3)
#   show_ms         `ktctl agent show` of one agent, whole process (median of 5)
#   replay_ms       `ktctl events --since 0` until every stored event is printed
#   events          how many events that was
#   idle_cpu_pct    daemon + shims CPU over IDLE_S seconds of idling, % of one core
#   daemon_pss_mib  PSS of the daemon with every agent running
#   total_pss_mib   the daemon's plus every shim's
#   stop_all_s      `ktctl agent stop --all`, whole process
#
# Prints `key value` lines as it goes and appends one row per size to DATA (default
# build/bench-scale.dat), the input of bench/scale_plot.sh. Never run by ctest.
#
#   bench/scale.sh            SIZES="100 1000 5000" IDLE_S=30 bench/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-100 1000 5000}
IDLE_S=${IDLE_S:-30}
DATA=${DATA:-$PWD/build/bench-scale.dat}
source bench/lib.sh
kt_build ktesio-runtime
WAIT=(python3 "$PWD/bench/procwait.py")
MARK=39$$
SLEEP_CMD="/bin/sleep $MARK"

cleanup() {
  set +e
  kt_stop_daemon
  pkill -f "$SLEEP_CMD" 2>/dev/null
  [[ -n "${work:-}" ]] && rm -rf "$work"
}
trap cleanup EXIT

median_of() {  # REPS COMMAND...: the median wall time of REPS whole runs, in ms
  local reps=$1 t0
  shift
  for _ in $(seq 1 "$reps"); do
    t0=$(now_ns)
    "$@" >/dev/null
    echo $((($(now_ns) - t0) / 1000))
  done | median | awk '{printf "%.1f", $1 / 1000}'
}
seconds_of() {  # COMMAND...: one whole run, in seconds
  local t0
  t0=$(now_ns)
  "$@" >/dev/null
  awk -v ns=$(($(now_ns) - t0)) 'BEGIN {printf "%.3f", ns / 1e9}'
}

mkdir -p "$(dirname "$DATA")"
[[ -s $DATA ]] || echo "# agents register_s start_all_s list_ms show_ms replay_ms events idle_cpu_pct daemon_pss_mib total_pss_mib stop_all_s" >"$DATA"

for n in $SIZES; do
  echo "== $n agents =="
  kt_workdir scale
  mkdir -p "$work/kt"
  printf '%s\n' 'contract_version = "1.0.0"' '[adapter]' 'kind = "sleep"' '[lifecycle.start]' \
    'exec = "/bin/sleep"' "args = [\"$MARK\"]" '[capabilities.pause]' 'linux = "guaranteed"' \
    '[metering]' 'source = "self-reported"' >"$work/kt/sleep.toml"
  {
    echo '[fleet]'
    echo 'name = "scale"'
    for i in $(seq 1 "$n"); do printf '[agents.s-%d]\nmanifest = "kt/sleep.toml"\n' "$i"; done
  } >"$work/fleet.toml"
  kt_start_daemon

  register_s=$(seconds_of ctl apply -f "$work/fleet.toml")
  start_all_s=$("${WAIT[@]}" procs "$n" "$SLEEP_CMD" -- "$KTCTL" --socket "$sock" agent start --all)
  kt_wait_settled
  list_ms=$(median_of 3 ctl --json agent list)
  show_ms=$(median_of 5 ctl agent show s-1)
  events=$(python3 -c 'import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(db.execute("select count(*) from events").fetchone()[0])' "$work/state/state.db")
  t0=$(now_ns)
  # ktctl follows the stream: the replay is complete once every stored event is printed.
  # ktctl itself in the background (not the ctl function, whose subshell a kill would leave
  # ktctl behind: a live ktctl shares the gRPC libraries' pages and so halves the daemon's PSS).
: >"$work/replay.ndjson"
  "$KTCTL" --socket "$sock" --json events --since 0 >"$work/replay.ndjson" &
  follower=$!
  until (($(wc -l <"$work/replay.ndjson") >= events)); do sleep 0.002; done
  replay_ms=$((($(now_ns) - t0) / 1000000))
  kill "$follower"
  wait "$follower" 2>/dev/null || true

  if pgrep -f "ktctl --socket $sock" >/dev/null; then
    echo "a ktctl process is still running: PSS would be shared with it" >&2
    exit 1
  fi
  mapfile -t shims < <(kt_shim_pids "$work" "$daemon")  # and the launcher
  sleep 2
  cpu_before=$(cpu_ticks "$daemon")
  for p in "${shims[@]}"; do cpu_before=$((cpu_before + $(cpu_ticks "$p"))); done
  sleep "$IDLE_S"
  cpu_after=$(cpu_ticks "$daemon")
  for p in "${shims[@]}"; do cpu_after=$((cpu_after + $(cpu_ticks "$p"))); done
  idle_cpu_pct=$(awk -v t=$((cpu_after - cpu_before)) -v hz="$(getconf CLK_TCK)" -v s="$IDLE_S" \
    'BEGIN {printf "%.2f", 100 * t / hz / s}')
  daemon_kib=$(pss_kb "$daemon")
  total_kib=$(pss_sum_kb "$daemon" "${shims[@]}")
  stop_all_s=$(seconds_of ctl agent stop --all --timeout 10)

  row="$n $register_s $start_all_s $list_ms $show_ms $replay_ms $events $idle_cpu_pct"
  row="$row $(awk -v k="$daemon_kib" 'BEGIN {printf "%.1f", k / 1024}')"
  row="$row $(awk -v k="$total_kib" 'BEGIN {printf "%.1f", k / 1024}') $stop_all_s"
  echo "$row" >>"$DATA"
  paste -d' ' <(head -1 "$DATA" | tr ' ' '\n' | tail -n +2) <(echo "$row" | tr ' ' '\n')
  kt_stop_daemon
  pkill -f "$SLEEP_CMD" 2>/dev/null || true
  rm -rf "$work"
done
echo "rows appended to $DATA; plot them with bench/scale_plot.sh"
