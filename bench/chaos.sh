#!/usr/bin/env bash
# Reliability under daemon crashes (quality.md, "Reliability figures we will report"): agents
# write output and self-reported usage continuously while ktesiod is SIGKILLed and restarted
# again and again. Afterwards every agent must still be running with the same pid (0 agents
# lost), every agent's ledger must equal exactly what it emitted (0 usage events lost or
# double-counted), and every heartbeat line must be in its captured log exactly once (0 log
# lines lost). Prints `key value` lines; exits 1 when any invariant fails.
#
#   bench/chaos.sh                      100 agents, 100 daemon SIGKILLs
#   N_AGENTS=20 N_KILLS=30 bench/chaos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N_AGENTS=${N_AGENTS:-100}
N_KILLS=${N_KILLS:-100}
USAGE_LINES=${USAGE_LINES:-1500}  # one every 20 ms: 30 s of usage per agent
B=${KTESIO_BUILD:-$PWD/build/release}
if [[ -z "${KTESIO_BUILD:-}" ]]; then
  scripts/install-deps.sh >/dev/null
  cmake --preset release >/dev/null
  cmake --build --preset release --target ktesiod ktctl ktesio-shim ktesio-probe >/dev/null
fi
KTESIOD=$B/ktesiod/ktesiod
PROBE=$B/tests/fixtures/probe/ktesio-probe
work=$(mktemp -d /tmp/kt-chaos-XXXXXX)
sock=$work/d.sock
daemon=
cleanup() {
  # The daemon must be gone before its agents are killed, or it restarts them (on-failure).
  [[ -n "$daemon" ]] && { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  pkill -9 -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  pkill -9 -f "$PROBE --heartbeat-ms 20 --usage-lines $USAGE_LINES" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ctl() { "$B/ktctl/ktctl" --socket "$sock" "$@"; }
start_daemon() {
  "$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn 2>>"$work/ktesiod.log" &
  daemon=$!
  until ctl daemon status >/dev/null 2>&1; do sleep 0.01; done
}

cat >"$work/chatty.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "chatty"
[lifecycle.start]
exec = "$PROBE"
args = ["--heartbeat-ms", "20", "--usage-lines", "$USAGE_LINES", "--usage-interval-ms", "20",
        "--usage-input", "1", "--usage-output", "2"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
start_daemon
for i in $(seq 0 $((N_AGENTS - 1))); do
  ctl agent register "c$i" --manifest "$work/chatty.toml" >/dev/null
done
for i in $(seq 0 $((N_AGENTS - 1))); do ctl agent start "c$i" >/dev/null & done
wait_for_starts() { for job in $(jobs -p); do [[ $job == "$daemon" ]] || wait "$job"; done; }
wait_for_starts
pids() {  # "name pid state" per agent, sorted
  ctl agent list --json | /usr/bin/python3 -c 'import json,sys
d = json.load(sys.stdin)
print("\n".join(sorted("%s %s %s" % (i["name"], i.get("pid"), i["state"]) for i in d["instances"])))'
}
before=$(pids)
running=$(grep -c " running$" <<<"$before" || true)
echo "agents_running_before $running of $N_AGENTS"

t0=$(date +%s%N)
: >"$work/restarts"
for _ in $(seq 1 "$N_KILLS"); do
  sleep "0.0$(( RANDOM % 50 + 50 ))"  # 50-99 ms of normal operation
  kill -9 "$daemon"
  wait "$daemon" 2>/dev/null || true
  r0=$(date +%s%N)
  start_daemon
  echo $(( ($(date +%s%N) - r0) / 1000000 )) >>"$work/restarts"
done
t1=$(date +%s%N)
echo "daemon_sigkills $N_KILLS over_ms $(( (t1 - t0) / 1000000 ))"
echo "restart_until_answering_ms p50 $(sort -n "$work/restarts" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') max $(sort -n "$work/restarts" | tail -1)"

# Let every agent finish its usage lines (30 s from its start), then let the daemon catch up.
sleep $(( USAGE_LINES * 20 / 1000 + 2 ))
expected_in=$USAGE_LINES
expected_out=$((USAGE_LINES * 2))
settled=0
for _ in $(seq 1 300); do
  short=$(ctl agent list --json | /usr/bin/python3 -c "import json,sys
d = json.load(sys.stdin)
print(sum(1 for i in d['instances'] if i['usage']['cumulative_input_tokens'] != $expected_in))")
  [[ $short == 0 ]] && { settled=1; break; }
  sleep 0.1
done
after=$(pids)
fail=0
same=$([[ "$before" == "$after" ]] && echo yes || echo no)
lost=$(grep -vc " running$" <<<"$after" || true)
echo "agents_lost $lost same_pids $same"
[[ $lost == 0 && $same == yes ]] || fail=1

ctl agent list --json | /usr/bin/python3 -c "import json,sys
d = json.load(sys.stdin)
bad = [(i['name'], i['usage']['cumulative_input_tokens'], i['usage']['cumulative_output_tokens'])
       for i in d['instances']
       if (i['usage']['cumulative_input_tokens'], i['usage']['cumulative_output_tokens'])
          != ($expected_in, $expected_out)]
print('usage_exact_agents', len(d['instances']) - len(bad), 'of', len(d['instances']),
      'expected_per_agent', $expected_in, '/', $expected_out, 'mismatches', bad[:5])
sys.exit(1 if bad else 0)" || fail=1

/usr/bin/python3 - "$work/state/agents" <<'PY' || fail=1
import glob, os, re, sys
worst = []
total = 0
for home in sorted(glob.glob(sys.argv[1] + "/*")):
    beats = []
    for f in sorted(glob.glob(home + "/logs/*.log")):
        for line in open(f, errors="replace"):
            m = re.search(r" agent-out heartbeat (\d+) ", line)
            if m:
                beats.append(int(m.group(1)))
    total += len(beats)
    missing = (max(beats) - len(set(beats))) if beats else -1  # the counter starts at 1
    dupes = len(beats) - len(set(beats))
    if missing or dupes:
        worst.append((os.path.basename(home), missing, dupes))
print("log_heartbeat_lines", total, "agents_with_gaps_or_duplicates", len(worst), worst[:5])
sys.exit(1 if worst else 0)
PY
echo "settled $settled"
[[ $settled == 1 ]] || fail=1
echo "chaos_verdict $([[ $fail == 0 ]] && echo pass || echo FAIL)"
exit "$fail"
