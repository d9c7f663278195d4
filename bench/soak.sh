#!/usr/bin/env bash
# The long run (docs/benchmarks.md "Soak"): 100 agents for MINUTES (default 60) under one
# release daemon — 80 writing output (a heartbeat a second) and self-reported usage (a line a
# second), 10 crash-looping (exit 3 after 2 s, restart policy always), 9 idle, 1 engine-observed
# making a model call through its metering proxy every 5 s (a loopback fake provider) — while
# clients list every second, follow every agent's logs and subscribe to the event stream.
# Samples the daemon's RSS, descriptor count and event log every 30 s and prints the slopes (per
# hour), then checks that nothing was lost: every usage line counted exactly once, the event
# stream's cursors contiguous, every followed heartbeat sequence gap-free. Prints `key value`
# lines; exit 1 on any loss. Never run by ctest.
#
#   bench/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-60}
SECONDS_TOTAL=$((MINUTES * 60))

source bench/lib.sh
kt_build
PROVIDER=$PWD/tests/fixtures/provider/fake_provider.py
AGENT=$PWD/tests/fixtures/provider/metered_agent.py

kt_workdir soak
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n "${daemon:-}" ]] && { "$KTCTL" --socket "$sock" agent stop --all --timeout 2 \
    >/dev/null 2>&1 || true; kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  cp "$work/samples.txt" /tmp/kt-soak-samples.txt 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

manifest() {  # NAME ARGS...
  local dir=$work/m/$1
  shift
  mkdir -p "$dir"
  local args
  args=$(printf '"%s", ' "$@")
  cat >"$dir/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "soak"
name = "soak"
[lifecycle.start]
exec = "$PROBE"
args = [${args%, }]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
}
lines=$((SECONDS_TOTAL))  # one usage line a second, for the whole soak
manifest busy --heartbeat-ms 1000 --usage-lines "$lines" --usage-interval-ms 1000
manifest crashy --heartbeat-ms 500 --crash-after-ms 2000 --exit-code 3
manifest idle --heartbeat-ms 60000

python3 "$PROVIDER" >"$work/provider.out" 2>"$work/provider.log" &
pids+=($!)
"$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn 2>"$work/ktesiod.log" &
daemon=$!
for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done
for _ in $(seq 1 100); do grep -q '^PORT ' "$work/provider.out" 2>/dev/null && break; sleep 0.05; done
provider_port=$(awk '/^PORT / {print $2; exit}' "$work/provider.out")

{
  echo '[fleet]'
  echo 'name = "soak"'
  for i in $(seq 1 80); do
    printf '[agents.busy-%d]\nmanifest = "m/busy"\nstate = "running"\nlabels = { role = "busy" }\n' "$i"
  done
  for i in $(seq 1 10); do
    printf '[agents.crashy-%d]\nmanifest = "m/crashy"\nstate = "running"\n' "$i"
    printf 'labels = { role = "crashy" }\n[agents.crashy-%d.config]\nrestart.policy = "always"\n' "$i"
  done
  for i in $(seq 1 9); do
    printf '[agents.idle-%d]\nmanifest = "m/idle"\nstate = "running"\n' "$i"
  done
} >"$work/fleet.toml"
ctl apply -f "$work/fleet.toml" >/dev/null

mkdir -p "$work/m/observed"
cat >"$work/m/observed/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "observed"
name = "observed"
[lifecycle.start]
exec = "/usr/bin/python3"
args = ["-u", "$AGENT"]
[capabilities.pause]
linux = "guaranteed"
[capabilities.interaction]
linux = "guaranteed"
[interaction]
channel = "stdio"
[metering]
source = "engine-observed"
[config."metering.base_url"]
env = "OPENAI_BASE_URL"
TOML
ctl agent register observed --manifest "$work/m/observed" >/dev/null
ctl agent config set observed metering.upstream_base_url \
  "http://127.0.0.1:$provider_port/v1" >/dev/null
ctl agent start observed >/dev/null

# Clients.
(while sleep 1; do ctl agent list --json >/dev/null 2>&1 || true; done) &
pids+=($!)
(while sleep 5; do ctl agent send observed chat >/dev/null 2>&1 || true; done) &
pids+=($!)
ctl agent logs -f --selector role=busy --tail 0 >"$work/follow.log" 2>/dev/null &
pids+=($!)
ctl events --since 0 --json >"$work/events.ndjson" 2>"$work/events.err" &
pids+=($!)

echo "t_s rss_kib fds db_bytes events" >"$work/samples.txt"
start=$(date +%s)
while true; do
  now=$(($(date +%s) - start))
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$daemon/status")
  fds=$(ls "/proc/$daemon/fd" | wc -l)
  db=$(stat -c %s "$work/state/state.db")
  ev=$(wc -l <"$work/events.ndjson")
  echo "$now $rss $fds $db $ev" >>"$work/samples.txt"
  ((now >= SECONDS_TOTAL)) && break
  sleep 30
done

slope() {  # column -> least-squares slope per hour
  awk -v c="$1" 'NR > 1 {n++; x = $1 / 3600; y = $c; sx += x; sy += y; sxx += x * x; sxy += x * y}
    END {d = n * sxx - sx * sx; print (d == 0 ? 0 : (n * sxy - sx * sy) / d)}' "$work/samples.txt"
}
echo "soak_minutes $MINUTES"
echo "daemon_rss_kib_first $(awk 'NR == 2 {print $2}' "$work/samples.txt")"
echo "daemon_rss_kib_last $(tail -1 "$work/samples.txt" | awk '{print $2}')"
echo "daemon_rss_kib_per_hour $(slope 2)"
echo "daemon_fds_last $(tail -1 "$work/samples.txt" | awk '{print $3}')"
echo "daemon_fds_per_hour $(slope 3)"
echo "state_db_bytes_per_hour $(slope 4)"
echo "events_per_hour $(slope 5)"

# Losses. Usage: let the busy agents finish their lines, then every line is counted once.
sleep 5
ctl agent stop --selector role=busy --timeout 5 >/dev/null
lost=0
expected=$((lines * 10))
wrong=$(ctl agent usage --selector role=busy --json | python3 -c '
import json, sys
docs = json.load(sys.stdin)
print(sum(1 for d in docs if d["usage"]["cumulative_input_tokens"] != '"$expected"'))')
echo "usage_agents_not_exactly_counted $wrong"
((wrong == 0)) || lost=1
gaps=$(python3 - "$work/events.ndjson" <<'PY'
import json, sys
cursors = [json.loads(l)["cursor"] for l in open(sys.argv[1]) if l.strip()]
print(sum(1 for a, b in zip(cursors, cursors[1:]) if b != a + 1))
PY
)
echo "event_stream_gaps $gaps"
((gaps == 0)) || lost=1
holes=$(awk -F' [|] ' '$2 ~ / heartbeat / {split($2, f, " "); n = f[4]; name = $1
  gsub(/ +$/, "", name); if (name in last && n != last[name] + 1) h++; last[name] = n}
  END {print h + 0}' "$work/follow.log")
echo "followed_heartbeat_gaps $holes"
((holes == 0)) || lost=1
restarts=$(ctl agent list --selector role=crashy --json | grep -o '"restart_count":[0-9]*' |
  awk -F: '{s += $2} END {print s + 0}')
echo "crash_loop_restarts $restarts"
observed=$(ctl agent usage observed --json | grep -o '"cumulative_input_tokens":[0-9]*' |
  cut -d: -f2)
echo "engine_observed_input_tokens $observed"
exit "$lost"
