#!/usr/bin/env bash
# Ktesio side by side with the process supervisors operators know (docs/benchmarks.md
# "Side by side with other supervisors"): supervisord, pm2, runit and s6, installed from Debian
# and npm, each running the same N `sleep` agents in the same run on this machine. For each
# supervisor it measures:
#
#   cold_boot_s      supervisor exec -> N autostart agents exist (best of REPS)
#   warm_start_s     one command -> N registered, stopped agents exist again (best of REPS)
#   pss_total_kib    PSS of the supervisor and its per-agent helpers, N agents running, the
#                    supervisor left alone SETTLE_S seconds after the last command (Ktesio's
#                    daemon and shims unmap the code a burst of work mapped a second after it)
#   pss_total_busy_kib, pss_daemon_busy_kib
#                    Ktesio's, right after an `agent list --json` and an `agent show`, before
#                    that release (the bare gRPC server, which releases nothing, for the floor)
#   pss_daemon_kib   PSS of the supervisor's main process alone; for the floor, the bare gRPC
#                    server after 1,000 calls, and a second one that, as the daemon does, binds
#                    its symbols at start (LD_BIND_NOW) and releases its start-up code (SIGUSR2)
#                    before 1,000 more
#   pss_idle_kib     the same once idle: Ktesio after its idle memory trim (memory_trim_idle_secs,
#                    30 s by default; 33 s after its last call) and one `agent show`, the second
#                    bare gRPC server trimmed the same way (SIGUSR1 to ktesio_bench echo-server)
#                    and one call, recorded when its trim was seen (PSS down by a fifth). The
#                    peers do not trim, so theirs is not measured again
#   bulk_s           start of an agent `cat`ing LINES lines -> the last one is in its log
#   per_line_s       the same, the writer making one write(2) per line (ktesio-probe)
#   restart_ms       SIGKILL of an agent -> its replacement exists (median of KILLS, GAP_S apart)
#   restart_exact_ms the killed agent's exit -> its replacement's exec, as the kernel stamps both
#                    (median of KILLS; root only): polling /proc resolves restart_ms only to
#                    the several milliseconds one scan of a few hundred processes takes
#   status_ms        the status of one agent through the supervisor's CLI (median of 20)
#
# Times are until the effect is visible (processes in /proc, the line in the log file), polled
# by bench/procwait.py, never until the command returns. Ktesio's kill test sets
# restart.reset_after_ms = 1000, so that, as with the peers, a run longer than a second ends a
# crash streak. Prints `figure peer value` lines as it goes, then a table with each peer's
# figure and Ktesio's as a ratio of it (below 1: Ktesio is faster or smaller). Never run by
# ctest. PEERS selects supervisors (ktesio is always measured first).
#
#   bench/compare.sh          N=100 REPS=2 LINES=1000000 KILLS=5 GAP_S=1.5 SETTLE_S=3 bench/compare.sh
#   PEERS="s6 runit" bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
REPS=${REPS:-2}
LINES=${LINES:-1000000}
KILLS=${KILLS:-5}
GAP_S=${GAP_S:-1.5}
SETTLE_S=${SETTLE_S:-3}
PEERS=${PEERS:-supervisord pm2 runit s6}
source bench/lib.sh

missing=()
command -v python3 >/dev/null || missing+=(python3)
command -v supervisord >/dev/null || missing+=(supervisor)
command -v runsvdir >/dev/null || missing+=(runit)
command -v s6-svscan >/dev/null || missing+=(s6)
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
fi
PM2=$PWD/build/bench-peers/node_modules/.bin/pm2
if [[ ! -x $PM2 ]]; then
  npm install --silent --no-audit --no-fund --prefix build/bench-peers pm2@7 >/dev/null
fi
kt_build ktesio-runtime ktesio_bench
kt_workdir compare
WAIT=(python3 "$PWD/bench/procwait.py")
MARK=37$$
SLEEP=/bin/sleep
SLEEP_CMD="$SLEEP $MARK"
TAIL_CMD="$SLEEP 38$$"
BULK_CMD="cat $work/lines.txt; exec $TAIL_CMD"
BULK_LAST=$(printf 'line %07d ' $((LINES - 1)))
PER_LINE_LAST="line $((LINES - 1)) "
results=$work/results

cleanup() {
  set +e
  kt_stop_daemon
  [[ -f $work/sv/sv.conf ]] && supervisorctl -c "$work/sv/sv.conf" shutdown >/dev/null 2>&1
  [[ -d $work/pm2home ]] && PM2_HOME=$work/pm2home "$PM2" kill >/dev/null 2>&1
  pkill -HUP -f "runsvdir -P $work" 2>/dev/null
  [[ -d $work/s6/scan ]] && s6-svscanctl -t "$work/s6/scan" 2>/dev/null
  sleep 0.5
  pkill -f "$SLEEP_CMD" 2>/dev/null
  pkill -f "$TAIL_CMD" 2>/dev/null
  pkill -f "$PROBE --lines" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

record() {  # FIGURE PEER VALUE
  echo "$1 $2 $3" | tee -a "$results"
}
best() { sort -g | head -1; }
sleepers() { pgrep -fx "$SLEEP_CMD" | wc -l; }
wait_sleepers_gone() {
  for _ in $(seq 1 200); do (($(sleepers) == 0)) && return 0; sleep 0.05; done
  echo "agents still running after their stop" >&2
  return 1
}
time_status_ms() {  # the median of 20 whole runs of COMMAND, in ms
  for _ in $(seq 1 20); do
    local t0; t0=$(now_ns)
    "$@" >/dev/null 2>&1 || true
    echo "scale=2; ($(now_ns) - $t0) / 1000000" | bc
  done | median
}
count_lines() {  # DIR: lines of the LINES the agent wrote that reached the files in DIR
  cat "$1"/* 2>/dev/null | grep -c 'line [0-9]* x' || true
}
# The figures every supervisor shares once its N agents run: PSS of MAIN and its per-agent
# HELPERS (space-separated pids), SIGKILL to replacement, and STATUS_COMMAND's time.
measure_running() {  # PEER MAIN HELPERS STATUS_COMMAND...
  local peer=$1 main=$2 helpers=$3
  shift 3
  # shellcheck disable=SC2086
  record pss_total_kib "$peer" "$(pss_sum_kb "$main" $helpers)"
  record pss_daemon_kib "$peer" "$(pss_kb "$main")"
  record restart_ms "$peer" "$("${WAIT[@]}" restart "$SLEEP_CMD" "$KILLS" "$GAP_S" | median)"
  if ((EUID == 0)); then
    record restart_exact_ms "$peer" \
      "$("${WAIT[@]}" restart-exact "$SLEEP_CMD" "$KILLS" "$GAP_S" | median)"
  fi
  record status_ms "$peer" "$(time_status_ms "$@")"
}
# START_COMMAND starts an agent writing LINES lines; until MARKER (its last) is in DIR's files.
measure_log() {  # PEER FIGURE DIR MARKER START_COMMAND...
  local peer=$1 figure=$2 dir=$3 marker=$4
  shift 4
  record "$figure" "$peer" "$("${WAIT[@]}" log "$dir" "$marker" -- "$@")"
  check_lines "$peer" "$figure" "$dir"
}
wait_pss_below() {  # PID KIB: until PID's PSS is below KIB (75 s at most)
  for _ in $(seq 1 150); do (($(pss_kb "$1") < $2)) && return 0; sleep 0.5; done
  echo "the PSS of $1 stayed at $(pss_kb "$1") KiB (waited for < $2)" >&2
  return 1
}
check_lines() {  # PEER FIGURE DIR
  local n; n=$(count_lines "$3")
  ((n == LINES)) || echo "$1 $2: $n of $LINES lines in the log" >&2
}

command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null
awk -v n="$LINES" 'BEGIN { for (i = 0; i < n; i++) printf "line %07d xxxxxxxxxxxxxxxxxx\n", i }' \
  >"$work/lines.txt"

# --- the floor: a bare callback-API gRPC server with the same libraries ------------------------
"$BENCH" echo-server "$work/echo.sock" &
echo_server=$!
sleep 0.3
"$BENCH" rpc "$work/echo.sock" 1000 version >/dev/null
bare_pss=$(pss_kb "$echo_server")
record pss_daemon_kib bare-grpc "$bare_pss"
record pss_daemon_busy_kib bare-grpc "$bare_pss"
kill "$echo_server"
wait "$echo_server" 2>/dev/null || true
# Like for like with the daemon, which binds its symbols at start (LD_BIND_NOW), releases its
# start-up code once booted and trims when idle: a second bare server doing the same. Released
# (SIGUSR2) and 1,000 more calls; then trimmed (SIGUSR1) and one call.
LD_BIND_NOW=1 "$BENCH" echo-server "$work/echo2.sock" &
echo_server=$!
sleep 0.3
"$BENCH" rpc "$work/echo2.sock" 1000 version >/dev/null
kill -USR2 "$echo_server"
sleep 0.3
"$BENCH" rpc "$work/echo2.sock" 1000 version >/dev/null
released_pss=$(pss_kb "$echo_server")
record pss_daemon_kib bare-grpc-released "$released_pss"
kill -USR1 "$echo_server"
if wait_pss_below "$echo_server" $((released_pss * 8 / 10)); then
  "$BENCH" rpc "$work/echo2.sock" 1 version >/dev/null
  sleep 0.3
  record pss_idle_kib bare-grpc "$(pss_kb "$echo_server")"
fi
kill "$echo_server"
wait "$echo_server" 2>/dev/null || true

# --- Ktesio ------------------------------------------------------------------------------------
ktesio() {
  local manifests=$work/kt
  mkdir -p "$manifests"
  write_manifest() {  # NAME EXEC ARGS (a TOML array body)
    printf '%s\n' 'contract_version = "1.0.0"' '[adapter]' "kind = \"$1\"" '[lifecycle.start]' \
      "exec = \"$2\"" "args = [$3]" '[capabilities.pause]' 'linux = "guaranteed"' '[metering]' \
      'source = "self-reported"' >"$manifests/$1.toml"
  }
  write_manifest sleep "$SLEEP" "\"$MARK\""
  write_manifest bulk /bin/sh "\"-c\", \"$BULK_CMD\""
  write_manifest perline "$PROBE" "\"--lines\", \"$LINES\", \"--line-bytes\", \"32\", \"--quiet\""
  {
    echo '[fleet]'
    echo 'name = "compare"'
    for i in $(seq 1 "$N"); do
      printf '[agents.s-%d]\nmanifest = "kt/sleep.toml"\nlabels = { group = "sleep" }\n' "$i"
      printf '[agents.s-%d.config]\nautostart = true\n"restart.reset_after_ms" = "1000"\n' "$i"
    done
    for a in bulk perline; do
      printf '[agents.%s]\nmanifest = "kt/%s.toml"\n' "$a" "$a"
      printf '[agents.%s.config]\n"logs.max_bytes" = "200000000"\n' "$a"
    done
  } >"$work/fleet.toml"
  kt_start_daemon
  ctl apply -f "$work/fleet.toml" >/dev/null

  local rep times=()
  for rep in $(seq 1 "$REPS"); do
    kt_stop_daemon
    wait_sleepers_gone
    # Started as kt_start_daemon (and the packaged unit) starts it: LD_BIND_NOW=1.
    times+=("$(LD_BIND_NOW=1 "${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- "$KTESIOD" --state-dir \
      "$work/state" --socket "$sock" --log-level warn)")
    daemon=$(pgrep -f "ktesiod --state-dir $work/state" | head -1)
  done
  record cold_boot_s ktesio "$(printf '%s\n' "${times[@]}" | best)"
  for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done

  times=()
  for rep in $(seq 1 "$REPS"); do
    kt_wait_settled
    ctl agent stop --selector group=sleep --timeout 5 >/dev/null
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- "$KTCTL" --socket "$sock" agent start \
      --selector group=sleep)")
  done
  record warm_start_s ktesio "$(printf '%s\n' "${times[@]}" | best)"
  ctl agent list --json >/dev/null
  ctl agent show s-1 >/dev/null
  # shellcheck disable=SC2046
  record pss_total_busy_kib ktesio "$(pss_sum_kb "$daemon" $(kt_shim_pids "$work" "$daemon"))"
  record pss_daemon_busy_kib ktesio "$(pss_kb "$daemon")"
  sleep "$SETTLE_S"
  measure_running ktesio "$daemon" "$(kt_shim_pids "$work" "$daemon" | xargs)" "$KTCTL" \
    --socket "$sock" agent show s-1
  local logs=$work/state/agents
  measure_log ktesio bulk_s "$logs/bulk/logs" "$BULK_LAST" "$KTCTL" --socket "$sock" agent start bulk
  measure_log ktesio per_line_s "$logs/perline/logs" "$PER_LINE_LAST" "$KTCTL" --socket "$sock" \
    agent start perline
  # Quiet from here: the daemon's idle trim follows 30-32 s after the last call (it looks once a
  # second; memory_trim_idle_secs = 30), and leaves less than the code release a second after it.
  sleep "$SETTLE_S"
  local released_kib; released_kib=$(pss_kb "$daemon")
  sleep $((33 - SETTLE_S))
  (($(pss_kb "$daemon") < released_kib)) ||
    echo "ktesio: no idle trim seen (PSS $(pss_kb "$daemon") KiB, $released_kib released)" >&2
  ctl agent show s-1 >/dev/null
  sleep 0.3
  record pss_idle_kib ktesio "$(pss_kb "$daemon")"
  kt_stop_daemon
  wait_sleepers_gone
}

# --- supervisord -------------------------------------------------------------------------------
supervisord_peer() {
  local dir=$work/sv conf=$work/sv/sv.conf
  mkdir -p "$dir/bulk" "$dir/perline"
  {
    printf '[unix_http_server]\nfile=%s\n' "$dir/sv.sock"
    printf '[supervisord]\nlogfile=%s\npidfile=%s\nchildlogdir=%s\n' "$dir/sv.log" \
      "$dir/sv.pid" "$dir"
    printf '[rpcinterface:supervisor]\n'
    printf 'supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n'
    printf '[supervisorctl]\nserverurl=unix://%s\n' "$dir/sv.sock"
    for i in $(seq 1 "$N"); do printf '[program:s-%d]\ncommand=%s\n' "$i" "$SLEEP_CMD"; done
    printf '[group:sleep]\nprograms=%s\n' "$(seq -s, -f 's-%g' 1 "$N")"
    local a command
    for a in bulk perline; do
      command="$PROBE --lines $LINES --line-bytes 32 --quiet"
      [[ $a == bulk ]] && command="/bin/sh -c \"$BULK_CMD\""
      printf '[program:%s]\ncommand=%s\nautostart=false\nautorestart=false\nstartsecs=0\n' \
        "$a" "$command"
      printf 'stdout_logfile=%s\nstdout_logfile_maxbytes=0\n' "$dir/$a/out.log"
    done
  } >"$conf"
  local sctl=(supervisorctl -c "$conf") rep times=() pid
  for rep in $(seq 1 "$REPS"); do
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- supervisord -n -c "$conf")")
    if ((rep < REPS)); then
      "${sctl[@]}" shutdown >/dev/null
      wait_sleepers_gone
      while pgrep -f "supervisord -n -c $conf" >/dev/null; do sleep 0.05; done
    fi
  done
  record cold_boot_s supervisord "$(printf '%s\n' "${times[@]}" | best)"
  until "${sctl[@]}" status >/dev/null 2>&1 || [[ $? -eq 3 ]]; do sleep 0.1; done
  pid=$(cat "$dir/sv.pid")

  times=()
  for rep in $(seq 1 "$REPS"); do
    "${sctl[@]}" stop 'sleep:*' >/dev/null
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- "${sctl[@]}" start 'sleep:*')")
  done
  record warm_start_s supervisord "$(printf '%s\n' "${times[@]}" | best)"
  sleep "$SETTLE_S"
  measure_running supervisord "$pid" "" "${sctl[@]}" status sleep:s-1
  measure_log supervisord bulk_s "$dir/bulk" "$BULK_LAST" "${sctl[@]}" start bulk
  measure_log supervisord per_line_s "$dir/perline" "$PER_LINE_LAST" "${sctl[@]}" start perline
  "${sctl[@]}" shutdown >/dev/null
  wait_sleepers_gone
}

# --- pm2 ---------------------------------------------------------------------------------------
pm2_peer() {
  local dir=$work/pm2
  export PM2_HOME=$work/pm2home
  mkdir -p "$dir/bulk" "$dir/perline"
  {
    echo 'module.exports = { apps: ['
    for i in $(seq 1 "$N"); do
      printf '{ name: "s-%d", script: "%s", args: "%s", interpreter: "none" },\n' "$i" "$SLEEP" \
        "$MARK"
    done
    echo '] };'
  } >"$dir/sleep.config.js"
  cat >"$dir/logs.config.js" <<JS
module.exports = { apps: [
  { name: "bulk", script: "/bin/sh", args: ["-c", "$BULK_CMD"], interpreter: "none",
    autorestart: false, out_file: "$dir/bulk/out.log", error_file: "$dir/bulk/err.log" },
  { name: "perline", script: "$PROBE", args: ["--lines", "$LINES", "--line-bytes", "32",
    "--quiet"], interpreter: "none", autorestart: false, out_file: "$dir/perline/out.log",
    error_file: "$dir/perline/err.log" },
] };
JS
  # Cold boot is pm2's own: `pm2 resurrect` of a saved process list spawns its daemon.
  "$PM2" start "$dir/sleep.config.js" >/dev/null
  "$PM2" save >/dev/null
  local rep times=() pid
  for rep in $(seq 1 "$REPS"); do
    "$PM2" kill >/dev/null
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- "$PM2" resurrect)")
  done
  record cold_boot_s pm2 "$(printf '%s\n' "${times[@]}" | best)"
  sleep 1
  pid=$(cat "$PM2_HOME/pm2.pid")

  times=()
  for rep in $(seq 1 "$REPS"); do
    "$PM2" stop all >/dev/null
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- "$PM2" start all)")
  done
  record warm_start_s pm2 "$(printf '%s\n' "${times[@]}" | best)"
  sleep "$SETTLE_S"
  measure_running pm2 "$pid" "" "$PM2" describe s-1
  measure_log pm2 bulk_s "$dir/bulk" "$BULK_LAST" "$PM2" start "$dir/logs.config.js" --only bulk
  measure_log pm2 per_line_s "$dir/perline" "$PER_LINE_LAST" "$PM2" start "$dir/logs.config.js" \
    --only perline
  "$PM2" kill >/dev/null
  wait_sleepers_gone
  unset PM2_HOME
}

# --- runit and s6: one service directory per agent ---------------------------------------------
write_services() {  # SCANDIR LOGGER: N sleep services, and bulk/perline (down) logging through LOGGER
  local scan=$1 logger=$2 i a
  for i in $(seq 1 "$N"); do
    mkdir -p "$scan/s-$i"
    printf '#!/bin/sh\nexec %s\n' "$SLEEP_CMD" >"$scan/s-$i/run"
    chmod +x "$scan/s-$i/run"
  done
  printf '#!/bin/sh\n%s\n' "$BULK_CMD" >"$work/bulk.sh"
  for a in bulk perline; do
    mkdir -p "$scan/$a/log" "$scan/../$a"
    touch "$scan/$a/down"
    if [[ $a == bulk ]]; then
      printf '#!/bin/sh\nexec /bin/sh %s\n' "$work/bulk.sh" >"$scan/$a/run"
    else
      printf '#!/bin/sh\nexec %s --lines %s --line-bytes 32 --quiet\n' "$PROBE" "$LINES" \
        >"$scan/$a/run"
    fi
    printf '#!/bin/sh\nexec %s %s\n' "$logger" "$(realpath -m "$scan/../$a")" >"$scan/$a/log/run"
    chmod +x "$scan/$a/run" "$scan/$a/log/run"
  done
}

runit_peer() {
  local scan=$work/runit/service rep times=() pid
  write_services "$scan" "svlogd -tt"
  echo s0 >"$work/runit/bulk/config"  # no rotation, as for every peer
  echo s0 >"$work/runit/perline/config"
  for rep in $(seq 1 "$REPS"); do
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- runsvdir -P "$scan")")
    if ((rep < REPS)); then pkill -HUP -f "runsvdir -P $scan"; wait_sleepers_gone; sleep 0.5; fi
  done
  record cold_boot_s runit "$(printf '%s\n' "${times[@]}" | best)"
  pid=$(pgrep -f "runsvdir -P $scan")

  times=()
  for rep in $(seq 1 "$REPS"); do
    sv down "$scan"/s-* >/dev/null
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- sv up "$scan"/s-*)")
  done
  record warm_start_s runit "$(printf '%s\n' "${times[@]}" | best)"
  sleep "$SETTLE_S"
  measure_running runit "$pid" "$(pgrep -P "$pid" -f '^runsv s-' | xargs)" sv status "$scan/s-1"
  measure_log runit bulk_s "$work/runit/bulk" "$BULK_LAST" sv up "$scan/bulk"
  measure_log runit per_line_s "$work/runit/perline" "$PER_LINE_LAST" sv up "$scan/perline"
  pkill -HUP -f "runsvdir -P $scan"
  wait_sleepers_gone
}

s6_peer() {
  local scan=$work/s6/scan rep times=() pid
  write_services "$scan" "s6-log T s99999999"
  for rep in $(seq 1 "$REPS"); do
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- s6-svscan "$scan")")
    if ((rep < REPS)); then s6-svscanctl -t "$scan"; wait_sleepers_gone; sleep 0.5; fi
  done
  record cold_boot_s s6 "$(printf '%s\n' "${times[@]}" | best)"
  pid=$(pgrep -fx "s6-svscan $scan")

  times=()
  local up=$work/s6/up.sh
  printf '#!/bin/sh\nfor d in %s/s-*; do s6-svc -u "$d"; done\n' "$scan" >"$up"
  for rep in $(seq 1 "$REPS"); do
    for d in "$scan"/s-*; do s6-svc -d "$d"; done
    wait_sleepers_gone
    times+=("$("${WAIT[@]}" procs "$N" "$SLEEP_CMD" -- /bin/sh "$up")")
  done
  record warm_start_s s6 "$(printf '%s\n' "${times[@]}" | best)"
  sleep "$SETTLE_S"
  measure_running s6 "$pid" "$(pgrep -P "$pid" -f '^s6-supervise s-' | xargs)" s6-svstat "$scan/s-1"
  measure_log s6 bulk_s "$work/s6/bulk" "$BULK_LAST" s6-svc -u "$scan/bulk"
  measure_log s6 per_line_s "$work/s6/perline" "$PER_LINE_LAST" s6-svc -u "$scan/perline"
  s6-svscanctl -t "$scan"
  wait_sleepers_gone
}

ktesio
for peer in $PEERS; do
  case $peer in
    supervisord) supervisord_peer ;;
    pm2) pm2_peer ;;
    runit) runit_peer ;;
    s6) s6_peer ;;
    *) echo "unknown peer '$peer' (supervisord, pm2, runit, s6)" >&2; exit 2 ;;
  esac
done

echo
echo "== $N agents, one run, $(nproc) cores; each peer's figure, and Ktesio's as a ratio of it =="
python3 - "$results" $PEERS <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    figure, peer, value = line.split()
    rows.setdefault(figure, {})[peer] = value
peers = sys.argv[2:]
print("%-20s %10s  %s" % ("figure", "ktesio", "  ".join("%-20s" % p for p in peers)))
for figure, values in rows.items():
    kt = values.get("ktesio")
    cells = []
    floors = {"bare-grpc": "bare gRPC", "bare-grpc-released": "bare gRPC released"}
    for p in peers + [f for f in floors if f in values]:
        v = values.get(p)
        if v is None:
            continue
        try:
            ratio = " (%.2f)" % (float(kt) / float(v))
        except (TypeError, ValueError, ZeroDivisionError):
            ratio = ""
        cells.append("%-20s" % ("%s %s%s" % (floors[p], v, ratio) if p in floors else "%s%s" % (v, ratio)))
    print("%-20s %10s  %s" % (figure, kt, "  ".join(cells)))
PY
