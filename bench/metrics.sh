#!/usr/bin/env bash
# The metrics endpoint's cost (docs/benchmarks.md): scrape latency and daemon CPU per scrape with
# 100 and 1,000 running agents, the exposition's size and promtool's verdict, and self-reported
# ingestion throughput with a 1 s scrape running vs none, all in one run. Prints `key value`
# lines. Never run by ctest: numbers from a shared, noisy machine.
#
#   bench/metrics.sh            N_SCRAPES=50 N_LINES=200000 bench/metrics.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N_SCRAPES=${N_SCRAPES:-50}
N_LINES=${N_LINES:-200000}

source bench/lib.sh
kt_build

kt_workdir mbench
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cleanup() {
  [[ -n "${scraper:-}" ]] && kill "$scraper" 2>/dev/null || true
  [[ -n "${daemon:-}" ]] && { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  pkill -f "$PROBE" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

"$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn \
  --metrics-listen "127.0.0.1:$port" 2>"$work/ktesiod.log" &
daemon=$!
for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done

mkdir -p "$work/idle"
cat >"$work/idle/adapter.toml" <<EOF
contract_version = "1.0.0"
[adapter]
kind = "idle"
[lifecycle.start]
exec = "$PROBE"
args = ["--quiet"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
EOF

start_agents() {  # registers and starts agents idle-$1 .. idle-$2, 8 at a time
  seq "$1" "$2" | xargs -P 8 -I{} sh -c \
    "'$KTCTL' --socket '$sock' agent register idle-{} --manifest '$work/idle' >/dev/null && \
     '$KTCTL' --socket '$sock' agent start idle-{} >/dev/null"
}

scrape_round() {  # $1: label
  local label=$1 t0 t1 times
  t0=$(cpu_ticks "$daemon")
  times=$(for _ in $(seq 1 "$N_SCRAPES"); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/metrics"
    sleep 0.25  # past the 200 ms sharing window: every scrape is a fresh engine read
  done)
  t1=$(cpu_ticks "$daemon")
  # Idle CPU over the same wall time, to subtract.
  local i0 i1
  i0=$(cpu_ticks "$daemon"); sleep $(echo "$N_SCRAPES * 0.25" | bc); i1=$(cpu_ticks "$daemon")
  echo "$times" | sort -n | awk -v l="$label" '{a[NR]=$1} END {
    i = int(NR * 0.99); if (i < 1) i = 1
    printf "scrape_%s_p50_ms %.2f\nscrape_%s_p99_ms %.2f\n", l, a[int((NR+1)/2)]*1000, l, a[i]*1000}'
  echo "scrape_${label}_daemon_cpu_ms_per_scrape $(echo "scale=2; (($t1-$t0)-($i1-$i0))*1000/$hz/$N_SCRAPES" | bc)"
  local body
  body=$(curl -s "http://127.0.0.1:$port/metrics")
  echo "scrape_${label}_bytes $(printf '%s' "$body" | wc -c)"
  echo "scrape_${label}_series $(printf '%s\n' "$body" | grep -vc '^#')"
  echo "scrape_${label}_promtool_findings $(printf '%s\n' "$body" | promtool check metrics 2>&1 | grep -c . || true)"
}

echo "== scrapes with 100 running agents =="
start_agents 1 100
scrape_round 100_agents
echo "== scrapes with 1000 running agents =="
start_agents 101 1000
scrape_round 1000_agents
ctl agent stop --all --timeout 0 >/dev/null

echo "== self-reported ingestion ($N_LINES lines), no scrape vs a 1 s scrape =="
ingest() {  # $1: name
  mkdir -p "$work/u-$1"
  cat >"$work/u-$1/adapter.toml" <<EOF
contract_version = "1.0.0"
[adapter]
kind = "usage"
[lifecycle.start]
exec = "$PROBE"
args = ["--quiet", "--usage-lines", "$N_LINES", "--usage-input", "1", "--usage-output", "1"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
EOF
  ctl agent register "$1" --manifest "$work/u-$1" >/dev/null
  local t0 t1
  t0=$(date +%s%N)
  ctl agent start "$1" >/dev/null
  until [[ "$(ctl agent usage "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["cumulative_input_tokens"])')" == "$N_LINES" ]]; do
    sleep 0.05
  done
  t1=$(date +%s%N)
  echo "scale=0; $N_LINES*1000000000/($t1-$t0)" | bc
}
echo "ingest_no_scrape_events_per_s $(ingest quiet)"
(while :; do curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; sleep 1; done) &
scraper=$!
echo "ingest_1s_scrape_events_per_s $(ingest scraped)"
kill "$scraper"; scraper=
