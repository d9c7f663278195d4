#!/usr/bin/env bash
# Operating many agents (docs/benchmarks.md "Operating many agents"): `ktctl apply` of a
# 100-instance fleet file from empty and the no-op re-apply; `ktctl agent start --all` of 100
# registered agents through one ktctl process, next to supervisord's `supervisorctl start all`
# of the same 100 `sleep` programs in the same run; and `ktctl top`'s own CPU over 30 s with 100
# agents, in a real terminal (tmux). Prints `key value` lines. Never run by ctest: numbers from a
# shared, noisy machine. Installs supervisor from Debian when missing.
#
#   bench/fleet.sh            N=100 REPS=2 TOP_SECONDS=30 bench/fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
REPS=${REPS:-2}
TOP_SECONDS=${TOP_SECONDS:-30}

source bench/lib.sh
scripts/install-deps.sh >/dev/null
if ! command -v supervisord >/dev/null; then
  apt-get install -y -qq --no-install-recommends supervisor >/dev/null
fi
kt_build

kt_workdir fbench
cleanup() {
  tmux kill-session -t ktbench 2>/dev/null || true
  [[ -n "${daemon:-}" ]] && { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  [[ -n "${supd:-}" ]] && { supervisorctl -c "$work/sup.conf" shutdown >/dev/null 2>&1 || true; } 
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  pkill -f "sleep 36$$" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

# The agents: `sleep`, as in the peers' configuration (a unique duration to find them).
mkdir -p "$work/sleep"
cat >"$work/sleep/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "sleep"
name = "sleep"
[lifecycle.start]
exec = "/bin/sleep"
args = ["36$$"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
{
  echo '[fleet]'
  echo 'name = "bench"'
  for i in $(seq 1 "$N"); do
    printf '[agents.s-%d]\nmanifest = "sleep"\nstate = "running"\nlabels = { group = "g%d" }\n' \
      "$i" $((i % 4))
  done
} >"$work/fleet.toml"

"$KTESIOD" --state-dir "$work/state" --socket "$sock" --log-level warn 2>"$work/ktesiod.log" &
daemon=$!
for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done

t=$(now)
ctl apply -f "$work/fleet.toml" >/dev/null
echo "apply_${N}_from_empty_s $(since "$t")"
t=$(now)
out=$(ctl apply -f "$work/fleet.toml")
echo "apply_${N}_noop_s $(since "$t")"
grep -q "applied: $N unchanged" <<<"$out" || { echo "the re-apply changed something: $out" >&2; exit 1; }

for rep in $(seq 1 "$REPS"); do
  ctl agent stop --all --timeout 5 >/dev/null
  t=$(now)
  ctl agent start --all >/dev/null
  echo "ktesio_start_all_${N}_rep${rep}_s $(since "$t")"
done
running=$(ctl agent list --selector group --json | grep -o '"state":"running"' | wc -l)
echo "ktesio_running_after_start_all $running"

# ktctl top in a real 80x24 terminal for TOP_SECONDS: its own CPU (user + system).
tmux new-session -d -s ktbench -x 80 -y 24 "$KTCTL --socket $sock top"
sleep 1
top_pid=$(pgrep -f "$KTCTL --socket $sock top" | head -1)
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
d0=$(ticks "$daemon")
t0=$(ticks "$top_pid")
sleep "$TOP_SECONDS"
t1=$(ticks "$top_pid")
d1=$(ticks "$daemon")
echo "top_cpu_percent_${N}_agents $(echo "scale=2; 100 * ($t1 - $t0) / $hz / $TOP_SECONDS" | bc)"
echo "daemon_cpu_percent_while_top $(echo "scale=2; 100 * ($d1 - $d0) / $hz / $TOP_SECONDS" | bc)"
tmux kill-session -t ktbench
ctl agent stop --all --timeout 5 >/dev/null

# supervisord: the same N sleep programs, started by one `supervisorctl start all`.
{
  cat <<CONF
[unix_http_server]
file=$work/sup.sock
[supervisord]
logfile=$work/supervisord.log
pidfile=$work/supervisord.pid
childlogdir=$work
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://$work/sup.sock
CONF
  for i in $(seq 1 "$N"); do
    printf '[program:s-%d]\ncommand=/bin/sleep 36%s\nautostart=false\nstartsecs=0\n' "$i" "$$"
  done
} >"$work/sup.conf"
supervisord -c "$work/sup.conf"
supd=1
for _ in $(seq 1 100); do supervisorctl -c "$work/sup.conf" status >/dev/null 2>&1 && break
  [[ $? -eq 3 ]] && break; sleep 0.1; done
for rep in $(seq 1 "$REPS"); do
  supervisorctl -c "$work/sup.conf" stop all >/dev/null || true
  t=$(now)
  supervisorctl -c "$work/sup.conf" start all >/dev/null
  echo "supervisord_start_all_${N}_rep${rep}_s $(since "$t")"
done
echo "supervisord_running_after_start_all $(supervisorctl -c "$work/sup.conf" status | grep -c RUNNING || true)"
