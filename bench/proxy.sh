#!/usr/bin/env bash
# The metering proxy, side by side in one run: a direct connection to a fast loopback provider
# (ktesio_proxy_bench upstream), the same provider behind ktesiod's engine-observed proxy, and
# behind nginx as a plain reverse proxy (streaming, unbuffered, upstream keep-alive) when nginx
# is installed (KTESIO_BENCH_PEERS=1 installs nginx-light from Debian).
#
# Latency is measured twice: with tiny bodies, and with each call carrying a conversation of
# PROMPT_BYTES (an agent's history, as agents send it; 64 KiB by default). The proxy's request
# planning of those two calls is also timed in process (ktesio_proxy_bench plan). The conversation
# calls go to PROMPT_PATH (/chat/completions by default, whose streamed body the proxy edits;
# /responses for a body it relays untouched: the provider answers both alike).
#
# SESSIONS=1 places every party in its own session, as they run when deployed: the provider, the
# daemon (a service), nginx (a daemon) and the client (an agent, which the shim starts in a session
# of its own). By default all share the script's session. The kernel places a session's tasks as
# one group (autogroup), so the two placements give different latencies: docs/benchmarks.md.
#
# ROUNDS=N (1 by default) measures each kind of figure N times, Ktesio and nginx back to back in
# each round and in turn first, then prints each figure's median over the rounds for both and the
# median of the rounds' ratios (ktesio_over_nginx_*): the figure to compare on a shared machine.
#
#   bench/proxy.sh                 N_LAT=1000 CONNS=32 SECONDS_TP=10 PROMPT_BYTES=65536 by default
#   ROUNDS=5 KTESIO_BENCH_PEERS=1 bench/proxy.sh
#   PROMPT_BYTES=1048576 PROMPT_PATH=/responses bench/proxy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N_LAT=${N_LAT:-1000}
CONNS=${CONNS:-32}
SECONDS_TP=${SECONDS_TP:-10}
PROMPT_BYTES=${PROMPT_BYTES:-65536}
PROMPT_PATH=${PROMPT_PATH:-/chat/completions}
SESSIONS=${SESSIONS:-0}
ROUNDS=${ROUNDS:-1}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "proxy.sh: ROUNDS must be a positive whole number (got '$ROUNDS')" >&2
  exit 2
fi

source bench/lib.sh
kt_build ktesiod ktctl ktesio-shim ktesio-probe ktesio_proxy_bench
PB=$B/bench/ktesio_proxy_bench
kt_workdir pbench
own=()  # what starts a party in its own session (SESSIONS=1)
if [[ $SESSIONS == 1 ]]; then
  own=(setsid)
  KT_WRAP=(setsid)
fi
cleanup() {
  # The daemon must be gone before its agents are killed, or it restarts them (on-failure).
  kt_stop_daemon  # stops the agent through the daemon first: a killed shim leaves its agent
  [[ -n "${upstream:-}" ]] && kill "$upstream" 2>/dev/null || true
  [[ -n "${nginx_pid:-}" ]] && kill "$nginx_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"${own[@]}" "$PB" upstream "$work/port" &
upstream=$!
for _ in $(seq 1 100); do [[ -s $work/port ]] && break; sleep 0.02; done
up_port=$(cat "$work/port")
direct="http://127.0.0.1:$up_port/v1"

kt_start_daemon
proxied=$(kt_metered_agent m "$direct" --quiet)

targets=("direct $direct" "ktesio $proxied")
if [[ "${KTESIO_BENCH_PEERS:-0}" == 1 ]] && ! command -v nginx >/dev/null; then
  apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
fi
if command -v nginx >/dev/null; then
  mkdir -p "$work/nginx"
  cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_max_body_size 64m;  # the default, 1 MiB, would refuse PROMPT_BYTES=1048576
  upstream provider { server 127.0.0.1:$up_port; keepalive 64; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:0;
    listen 127.0.0.1:18471;
    location / {
      proxy_pass http://provider;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
NGINX
  sed -i '/listen 127.0.0.1:0;/d' "$work/nginx/nginx.conf"
  "${own[@]}" nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
  nginx_pid=$!
  sleep 0.5
  targets+=("nginx http://127.0.0.1:18471/v1")
fi

# One kind of figure for one target, printed as `NAME_figure value` and kept (with the round) for
# the summary.
measure() {  # KIND ROUND NAME URL
  local kind=$1 round=$2 name=$3 url=$4 out
  out=$(case $kind in
    tiny) "${own[@]}" "$PB" latency "$url" "$N_LAT" | sed "s/^/${name}_/" ;;
    conversation)
      "${own[@]}" "$PB" latency "$url" "$((N_LAT / 2))" "$PROMPT_BYTES" "$PROMPT_PATH" |
        sed "s/^/${name}_conversation_/"
      ;;
    throughput) "${own[@]}" "$PB" throughput "$url" "$CONNS" "$SECONDS_TP" | sed "s/^/${name}_/" ;;
  esac)
  echo "$out"
  sed "s/^/$round /" <<<"$out" >>"$work/figures"
}
# Each kind of figure, ROUNDS times, Ktesio and nginx back to back in every round, the one first
# in one round going second in the next: on a shared machine the load drifts over a run, and a
# figure compared with one taken minutes later measures the drift as much as the proxy.
rounds() {  # KIND
  local kind=$1 round t
  for round in $(seq 1 "$ROUNDS"); do
    [[ $ROUNDS -gt 1 ]] && echo "-- round $round"
    local order=("${targets[@]}")
    if ((round % 2 == 0)) && [[ ${#targets[@]} -eq 3 ]]; then
      order=("${targets[0]}" "${targets[2]}" "${targets[1]}")
    fi
    for t in "${order[@]}"; do
      set -- $t
      measure "$kind" "$round" "$1" "$2"
    done
  done
}
: >"$work/figures"
echo "== metering proxy: latency ($N_LAT sequential keep-alive calls of each kind; sessions: $([[ $SESSIONS == 1 ]] && echo "one each" || echo shared); rounds: $ROUNDS) =="
rounds tiny
echo "== metering proxy: latency with a ${PROMPT_BYTES}-byte conversation in every call to $PROMPT_PATH =="
rounds conversation
echo "== request planning of those calls, in process (CPU only: the streamed call's is on its first token's path) =="
"$PB" plan "$PROMPT_BYTES" 2000
echo "== metering proxy: throughput ($CONNS connections streaming for ${SECONDS_TP}s) =="
rounds throughput
if [[ $ROUNDS -gt 1 && ${#targets[@]} -eq 3 ]]; then
  echo "== over $ROUNDS rounds: the medians, and the median of each round's Ktesio / nginx =="
  python3 - "$work/figures" <<'PY'
import statistics, sys
by = {}  # (name, figure) -> {round: value}
for line in open(sys.argv[1]):
    round_, key, value = line.split()
    name, figure = key.split("_", 1)
    by.setdefault((name, figure), {})[int(round_)] = float(value)
for (name, figure), ours in sorted(by.items()):
    theirs = by.get(("nginx", figure))
    if name != "ktesio" or not theirs:
        continue
    rounds = sorted(set(ours) & set(theirs))
    ratios = [ours[r] / theirs[r] for r in rounds if theirs[r] > 0]
    print(f"ktesio_{figure}_median {statistics.median(ours.values()):.0f}")
    print(f"nginx_{figure}_median {statistics.median(theirs.values()):.0f}")
    if ratios:
        print(f"ktesio_over_nginx_{figure} {statistics.median(ratios):.3f}")
PY
fi
echo "ktesio_proxy_daemon_pss_kb $(awk '/^Pss:/ {print $2}' /proc/$daemon/smaps_rollup)"
ctl agent usage m
