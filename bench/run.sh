#!/usr/bin/env bash
# Runs Ktesio's benchmarks on this machine and prints `key value` lines (and a summary).
# Builds the release preset first. Numbers from a shared, noisy machine: compare figures from
# the same run only; peers (supervisord) are measured side by side when installed
# (KTESIO_BENCH_PEERS=1 installs supervisor from Debian).
#
#   bench/run.sh            all benchmarks
#   N_RPC=10000 N_AGENTS=100 N_FLEET=1000 bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N_RPC=${N_RPC:-10000}
N_AGENTS=${N_AGENTS:-100}
N_FLEET=${N_FLEET:-1000}

source bench/lib.sh
kt_build ktesiod ktctl ktesio-shim ktesio-probe ktesio_bench ktesio_ingest_bench
kt_workdir bench
cleanup() {
  # The daemon must be gone before its agents are killed, or it restarts them (on-failure).
  [[ -n "${daemon:-}" ]] && { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  [[ -n "${echo_server:-}" ]] && kill "$echo_server" 2>/dev/null || true
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  pkill -f "$PROBE" 2>/dev/null || true
  [[ -n "${supervisord_pid:-}" ]] && kill "$supervisord_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
median_ms() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
p99_ms() { sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2f", a[i]}'; }
time_cmd_ms() {  # runs "$@" N times, prints one duration (ms) per run
  local n=$1; shift
  for _ in $(seq 1 "$n"); do
    local t0; t0=$(now_ns); "$@" >/dev/null 2>&1; local t1; t1=$(now_ns)
    echo "scale=3; ($t1-$t0)/1000000" | bc
  done
}

command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null

kt_start_daemon

echo "== unary RPC over the Unix socket ($N_RPC calls) =="
"$BENCH" echo-server "$work/echo.sock" &
echo_server=$!
sleep 0.3
"$BENCH" rpc "$work/echo.sock" "$N_RPC" version | sed 's/^rpc_/bare_echo_rpc_/'
"$BENCH" rpc "$sock" "$N_RPC" version
"$BENCH" rpc "$sock" "$N_RPC" status

echo "== whole-process ktctl daemon status (200 runs) =="
times=$(time_cmd_ms 200 "$KTCTL" --socket "$sock" daemon status)
echo "ktctl_status_median_ms $(echo "$times" | median_ms)"
echo "ktctl_status_p99_ms $(echo "$times" | p99_ms)"

echo "== registry: $N_FLEET instances =="
t0=$(now_ns)
for i in $(seq 0 $((N_FLEET - 1))); do ctl agent register "f$i" --kind mock >/dev/null; done
t1=$(now_ns)
echo "register_${N_FLEET}_total_ms $(( (t1 - t0) / 1000000 ))"
echo "register_per_second_via_ktctl $(echo "scale=1; $N_FLEET*1000000000/($t1-$t0)" | bc)"
times=$(time_cmd_ms 20 "$KTCTL" --socket "$sock" agent list --json)
echo "list_${N_FLEET}_json_median_ms $(echo "$times" | median_ms)"
"$BENCH" rpc "$sock" 200 list | sed "s/^rpc_list/rpc_list_${N_FLEET}/"

echo "== supervision: $N_AGENTS idle agents =="
mkdir -p "$work/idle"
cat >"$work/idle/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "idle"
[lifecycle.start]
exec = "$PROBE"
args = ["--quiet", "--print-env", "--bench-idle-marker"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
for i in $(seq 0 $((N_AGENTS - 1))); do ctl agent register "a$i" --manifest "$work/idle" >/dev/null; done
"$BENCH" start "$sock" a "$N_AGENTS" "--bench-idle-marker"
sleep 1
shims=$(kt_shim_pids "$work" "$daemon")  # and the launcher
daemon_pss=$(pss_kb "$daemon")
shim_pss=0
for p in $shims; do shim_pss=$((shim_pss + $(pss_kb "$p"))); done
nshims=$(echo "$shims" | wc -w)
echo "daemon_pss_kb $daemon_pss"
echo "shims $nshims shims_pss_total_kb $shim_pss"  # the launcher counted as one
echo "supervision_total_pss_kb $((daemon_pss + shim_pss))"
echo "shim_pss_per_agent_kb $(( N_AGENTS > 0 ? shim_pss / N_AGENTS : 0 ))"  # the launcher included
before=$(cpu_ticks "$daemon"); sb=0; for p in $shims; do sb=$((sb + $(cpu_ticks "$p"))); done
sleep 10
after=$(cpu_ticks "$daemon"); sa=0; for p in $shims; do sa=$((sa + $(cpu_ticks "$p"))); done
echo "idle_10s_cpu_ticks_daemon $((after - before)) shims $((sa - sb))"

echo "== daemon SIGKILLed with $N_AGENTS agents running: restart until all re-adopted =="
pids_of_idle() {  # "name pid" of the idle agents, sorted, from a list document on stdin
  /usr/bin/python3 -c 'import json,sys
d=json.load(sys.stdin)
print("\n".join(sorted("%s %s %s" % (i["name"], i.get("pid"), i["state"]) for i in d["instances"] if i["kind"] == "idle")))'
}
before_pids=$(ctl agent list --json | pids_of_idle)
kill -9 "$daemon"; wait "$daemon" 2>/dev/null || true
t0=$(now_ns)
"$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn 2>>"$work/ktesiod.log" &
daemon=$!
until ctl agent list --json >"$work/list.json" 2>/dev/null; do :; done
t1=$(now_ns)
after_pids=$(pids_of_idle <"$work/list.json")
running=$(echo "$after_pids" | grep -c " running$" || true)
echo "readopt_${N_AGENTS}_until_answered_ms $(( (t1 - t0) / 1000000 )) running $running same_pids $([[ "$before_pids" == "$after_pids" ]] && echo yes || echo no)"

echo "== first crash -> restart committed (10 crashes, engine log timestamps, no polling) =="
# Polling `agent show` in a loop competes for the 2 cores with the restart it measures, so the
# agent is killed, left alone for 0.6 s, and the daemon's own log (ms resolution) is read.
: >"$work/kills"
for _ in $(seq 1 10); do
  ctl agent start a0 >/dev/null 2>&1 || true
  old=$(ctl agent show a0 --json | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
  sleep 0.2
  date -u +%Y-%m-%dT%H:%M:%S.%3N >>"$work/kills"
  kill -9 "$old"
  sleep 0.6
  ctl agent stop a0 --timeout 0 >/dev/null
done
/usr/bin/python3 - "$work/state/agents/a0/logs" "$work/kills" <<'PY'
import datetime, glob, sys
ts = lambda s: datetime.datetime.strptime(s[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp() * 1000
kills = [ts(l) for l in open(sys.argv[2])]
lines = sorted(l for f in glob.glob(sys.argv[1] + "/*.log") for l in open(f, errors="replace"))
crash = [ts(l) for l in lines if "-> failed (crashed" in l][-len(kills):]
restart = [ts(l) for l in lines if "(restarted{" in l][-len(kills):]
for name, at in (("kill_to_crash_committed_ms", crash), ("kill_to_restart_committed_ms", restart)):
    d = sorted(b - a for a, b in zip(kills, at))
    print(name, "p50 %.0f max %.0f (n=%d)" % (d[len(d) // 2], d[-1], len(d)))
PY

echo "== stop of a TERM-ignoring tree (2 s window) =="
cat >"$work/tree.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "tree"
[lifecycle.start]
exec = "$PROBE"
args = ["--ignore-sigterm", "--spawn-children", "3", "--pid-file", "$work/tree.pids"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
ctl agent register tree --manifest "$work/tree.toml" >/dev/null
ctl agent start tree >/dev/null
sleep 0.2
t0=$(now_ns); ctl agent stop tree --timeout 2 >/dev/null; t1=$(now_ns)
alive=0; for p in $(cat "$work/tree.pids"); do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
echo "tree_stop_ms $(( (t1 - t0) / 1000000 )) survivors $alive"

echo "== log capture: 1,000,000 lines =="
for mode in per-line bulk; do
  flags='"--lines", "1000000", "--line-bytes", "32", "--quiet"'
  [[ $mode == bulk ]] && flags="$flags, \"--bulk\""
  cat >"$work/lines-$mode.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "lines"
[lifecycle.start]
exec = "$PROBE"
args = [$flags]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
  ctl agent register "lines-$mode" --manifest "$work/lines-$mode.toml" >/dev/null
  ctl agent config set "lines-$mode" logs.max_bytes 200000000 >/dev/null
  ctl agent start "lines-$mode" >/dev/null 2>&1 || true
  logs="$work/state/agents/lines-$mode/logs"
  until grep -qh "agent-out line 999999 " "$logs"/*.log 2>/dev/null; do sleep 0.01; done
  # The shim stamps every record: first to last numbered line is the capture time.
  first=$(grep -h -m1 " agent-out line 0 " "$logs"/*.log | cut -c1-23)
  last=$(grep -h " agent-out line 999999 " "$logs"/*.log | cut -c1-23)
  ms=$(( $(date -d "$last" +%s%3N) - $(date -d "$first" +%s%3N) ))
  count=$(grep -h " agent-out line " "$logs"/*.log | wc -l)
  echo "capture_1M_${mode}_ms $ms lines_captured $count"
done

echo "== self-reported usage ingestion: 200,000 KTESIO_USAGE lines in one burst =="
cat >"$work/usage.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "usage"
[lifecycle.start]
exec = "$PROBE"
args = ["--usage-lines", "200000", "--usage-input", "1", "--usage-output", "2", "--quiet", "--heartbeat-ms", "600000"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
ctl agent register usage --manifest "$work/usage.toml" >/dev/null
t0=$(now_ns)  # ingestion starts with the launch, before `start` returns after the readiness window
ctl agent start usage >/dev/null
ingested=0
for _ in $(seq 1 3000); do
  ingested=$(ctl agent usage usage --json |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["cumulative_input_tokens"])')
  [[ $ingested -ge 200000 ]] && break
done
t1=$(now_ns)
ms=$(( (t1 - t0) / 1000000 ))
echo "ingest_200k_ms_from_start $ms ingested $ingested events_per_second_at_least $(( ingested * 1000 / (ms > 0 ? ms : 1) ))"
echo "== self-reported ingestion alone: 200,000 lines through IngestUsageFile on a real store =="
# The daemon's own ingestion code, timed around its calls only (no agent, no polling): batches of
# 1,000 lines as a busy agent's usage file grows, and one batch of everything; unpriced, then
# priced with budgets checked.
"$B/bench/ktesio_ingest_bench" "$work/ingest" 200000 1000 | sed -n 's/^ingest_events_per_second/ingest_batch1000_events_per_second/p'
"$B/bench/ktesio_ingest_bench" "$work/ingest" 200000 200000 | sed -n 's/^ingest_events_per_second/ingest_batch200000_events_per_second/p'
"$B/bench/ktesio_ingest_bench" "$work/ingest" 200000 1000 priced | sed -n 's/^ingest_events_per_second/ingest_batch1000_priced_events_per_second/p'

echo "== budget breach -> agent frozen (pause at the crossing usage line), 7 runs =="
# The probe writes a usage line every 5 ms and a heartbeat (with its wall clock) every 1 ms; the
# 200th line crosses budget.tokens.per_run = 200. Frozen at = the last heartbeat before the
# pause; crossing at = the capture time of the crossing line (both wall-clock milliseconds).
cat >"$work/breach.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "breach"
[lifecycle.start]
exec = "$PROBE"
args = ["--usage-lines", "100000", "--usage-input", "1", "--usage-output", "0", "--usage-interval-ms", "5", "--heartbeat-ms", "1"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
ctl agent register breach --manifest "$work/breach.toml" >/dev/null
ctl agent config set breach budget.tokens.per_run 200 >/dev/null
samples=()
for _ in $(seq 1 7); do
  ctl agent start breach >/dev/null 2>&1 || ctl agent restart breach >/dev/null
  for _ in $(seq 1 200); do
    [[ "$(ctl agent show breach --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["state"])')" == paused ]] && break
    sleep 0.05
  done
  sleep 0.3
  samples+=("$(ctl agent logs breach --json --tail 3000 | /usr/bin/python3 -c '
import datetime, json, sys
crossing = last_beat = None
for raw in sys.stdin:
    line = json.loads(raw)
    text = line["text"]
    if "KTESIO_USAGE" in text and "\"sequence\":199," in text:
        crossing = datetime.datetime.fromisoformat(line["at"].replace("Z", "+00:00")).timestamp() * 1000
    elif text.startswith("heartbeat "):
        last_beat = int(text.split()[2])
print("%.0f" % (last_beat - crossing) if crossing and last_beat else "nan")')")
  ctl agent stop breach --timeout 0 >/dev/null 2>&1 || true
done
echo "breach_to_frozen_ms_samples ${samples[*]}"
echo "breach_to_frozen_ms_median $(printf '%s\n' "${samples[@]}" | grep -v nan | median_ms)"

echo "== event fan-out: 100 subscribers, 10 agents x 1,000 usage events/s for 5 s =="
cat >"$work/fan.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "fan"
[lifecycle.start]
exec = "$PROBE"
args = ["--usage-lines", "5000", "--usage-input", "1", "--usage-output", "1", "--usage-interval-ms", "1", "--quiet", "--heartbeat-ms", "600000"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
fan_round() {  # $1 = number of subscribers; prints "<ms until all 50,000 ingested> <events per subscriber>"
  local subs=$1 pids=() t0 t1 total=0 base_tokens
  base_tokens=$(ctl agent usage --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["total_input_tokens"])')
  for i in $(seq 1 "$subs"); do
    ctl events --json >"$work/sub$i.out" 2>/dev/null &  # live events from now on
    pids+=($!)
  done
  sleep 1
  for i in $(seq 0 9); do ctl agent register "fan$subs-$i" --manifest "$work/fan.toml" >/dev/null; done
  t0=$(now_ns)
  for i in $(seq 0 9); do ctl agent start "fan$subs-$i" >/dev/null & done
  wait_ok=0
  for _ in $(seq 1 600); do
    total=$(ctl agent usage --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["total_input_tokens"])')
    [[ $total -ge $(( base_tokens + 50000 )) ]] && { wait_ok=1; break; }
    sleep 0.05
  done
  t1=$(now_ns)
  sleep 1
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null || true
  local min=999999999
  for i in $(seq 1 "$subs"); do
    n=$(grep -c '"usage_update"' "$work/sub$i.out" || true)
    (( n < min )) && min=$n
  done
  (( subs == 0 )) && min=0
  for i in $(seq 0 9); do ctl agent stop "fan$subs-$i" --timeout 0 >/dev/null 2>&1 || true; done
  echo "$(( (t1 - t0) / 1000000 )) $min $wait_ok"
}
read -r ms0 _ ok0 <<<"$(fan_round 0)"
read -r ms100 min100 ok100 <<<"$(fan_round 100)"
echo "fanout_ingest_50k_ms_no_subscribers $ms0 complete $ok0"
echo "fanout_ingest_50k_ms_100_subscribers $ms100 complete $ok100 min_events_per_subscriber $min100 of 50000"

if [[ "${KTESIO_BENCH_PEERS:-0}" == 1 ]]; then
  echo "== peer: supervisord (same machine, same run) =="
  command -v supervisord >/dev/null || apt-get install -y -qq supervisor >/dev/null
  mkdir -p "$work/sv"
  {
    echo "[unix_http_server]"; echo "file=$work/sv/sv.sock"
    echo "[supervisord]"; echo "logfile=$work/sv/sv.log"; echo "pidfile=$work/sv/sv.pid"
    echo "nodaemon=true"
    echo "[rpcinterface:supervisor]"
    echo "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface"
    echo "[supervisorctl]"; echo "serverurl=unix://$work/sv/sv.sock"
    for i in $(seq 0 $((N_AGENTS - 1))); do
      echo "[program:p$i]"; echo "command=$PROBE --quiet"; echo "autostart=false"
      echo "stdout_logfile=$work/sv/p$i.log"
    done
  } >"$work/sv/sv.conf"
  supervisord -c "$work/sv/sv.conf" &
  supervisord_pid=$!
  sleep 2
  times=$(time_cmd_ms 20 supervisorctl -c "$work/sv/sv.conf" status p0)
  echo "peer_supervisorctl_status_median_ms $(echo "$times" | median_ms)"
  t0=$(now_ns); supervisorctl -c "$work/sv/sv.conf" start all >/dev/null; t1=$(now_ns)
  echo "peer_supervisord_start_${N_AGENTS}_ms $(( (t1 - t0) / 1000000 ))"
  sleep 1
  total=$(pss_kb "$supervisord_pid")
  echo "peer_supervisord_pss_kb $total"
fi
echo "== done =="
