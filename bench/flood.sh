#!/usr/bin/env bash
# A local connection flood against one agent's metering proxy, as a hostile local process would
# try it (docs/benchmarks.md "A local connection flood"): CONNECTIONS idle connections, each
# holding half a request head, opened from two processes, against a release daemon at this
# machine's default descriptor limits. While the flood holds it times `ktctl daemon status`
# (REPS times) and an `agent restart`, samples the daemon's CPU; afterwards it counts the daemon
# log's lines and checks that the proxy answers again. Never run by ctest.
#
#   bench/flood.sh            CONNECTIONS=20000 REPS=5 PRESET=release bench/flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CONNECTIONS=${CONNECTIONS:-20000}
REPS=${REPS:-5}

source bench/lib.sh
kt_build

kt_workdir flood
flooders=()
cleanup() {
  for pid in "${flooders[@]}"; do kill "$pid" 2>/dev/null || true; done
  [[ -n "${daemon:-}" ]] && { "$KTCTL" --socket "$sock" agent stop --all --timeout 1 \
    >/dev/null 2>&1 || true; kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

kt_start_daemon --log-level info  # the default level: the log volume under a flood is a figure
echo "daemon descriptor limit: $(awk '/Max open files/ {print $4}' /proc/$daemon/limits)"

url=$(kt_metered_agent a http://127.0.0.1:9/v1)
port=$(echo "$url" | sed -E 's|http://127.0.0.1:([0-9]+)/.*|\1|')
echo "proxy: $url"

cat >"$work/flood.py" <<'PY'
import socket, sys, time
port, count, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for i in range(count):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        s.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        pass  # refused or reset: the daemon closed it at once
    held.append(s)
open(ready, "w").write(str(len(held)))
time.sleep(3600)
PY
half=$(( CONNECTIONS / 2 ))
t0=$(date +%s%N)
for i in 1 2; do
  python3 "$work/flood.py" "$port" "$half" "$work/ready-$i" &
  flooders+=($!)
done
until [[ -f $work/ready-1 && -f $work/ready-2 ]]; do sleep 0.05; done
echo "flood: $CONNECTIONS connections opened in $(ms_since "$t0") ms"
cpu0=$(awk '{print $14 + $15}' /proc/$daemon/stat)
echo "daemon descriptors during the flood: $(ls /proc/$daemon/fd | wc -l)"
for ((r = 1; r <= REPS; r++)); do
  t=$(date +%s%N)
  if ctl --timeout 5 daemon status >"$work/status.txt" 2>&1; then rc=0; else rc=$?; fi
  echo "daemon status during the flood: $(ms_since "$t") ms (exit $rc)"
done
grep -o "metering proxy under a connection flood[^;]*" "$work/status.txt" | head -1 || true
t=$(date +%s%N)
if ctl --timeout 20 agent restart a --timeout 0 >/dev/null 2>&1; then rc=0; else rc=$?; fi
echo "agent restart during the flood: $(ms_since "$t") ms (exit $rc)"
sleep 10
cpu1=$(awk '{print $14 + $15}' /proc/$daemon/stat)
echo "daemon CPU during the flood: $(( (cpu1 - cpu0) )) ticks in about 10 s ($(getconf CLK_TCK) per s)"
for pid in "${flooders[@]}"; do kill "$pid"; done
flooders=()
t=$(date +%s%N)
url=$(ctl agent show a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["proxy_url"])')
until code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"model":"m"}' \
  "$url/chat/completions") && [[ $code != 000 ]]; do sleep 0.05; done
echo "proxy answers again $(ms_since "$t") ms after the flood ended (HTTP $code: no upstream)"
echo "daemon log: $(wc -l <"$work/ktesiod.log") lines, $(wc -c <"$work/ktesiod.log") bytes;" \
  "refusal summaries: $(grep -c 'metering proxy: refused' "$work/ktesiod.log" || true)"
