#!/usr/bin/env bash
# The store under a steady usage stream with retention (docs/benchmarks.md "Retention"):
# AGENTS self-reported agents each report a usage line every INTERVAL_MS for MINUTES, under a
# daemon keeping at most EVENTS_MAX events and pruning per-call ledger rows of runs ended more
# than 60 s ago (each agent restarts every RUN_SECONDS so runs end). Prints, every 15 s, the
# usage lines accepted so far, state.db's size, the WAL's, and the disk blocks the run
# directories (usage copies, logs) take; then the bytes per usage line before pruning starts
# and the steady-state sizes. Never run by ctest.
#
#   bench/retention.sh            AGENTS=20 INTERVAL_MS=20 MINUTES=4 EVENTS_MAX=20000 PRESET=release bench/retention.sh
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTS=${AGENTS:-20}
INTERVAL_MS=${INTERVAL_MS:-20}
MINUTES=${MINUTES:-4}
EVENTS_MAX=${EVENTS_MAX:-20000}
RUN_SECONDS=${RUN_SECONDS:-30}

source bench/lib.sh
kt_build

kt_workdir retention
cleanup() {
  [[ -n "${daemon:-}" ]] && { "$KTCTL" --socket "$sock" agent stop --all --timeout 1 \
    >/dev/null 2>&1 || true; kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; } || true
  pkill -f "ktesio-shim --run-dir $work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/ktesiod.toml" <<TOML
retention_events_max = $EVENTS_MAX
retention_ledger_secs = 60
retention_audit_secs = 60
retention_interval_secs = 5
TOML
lines=$((RUN_SECONDS * 1000 / INTERVAL_MS))
mkdir -p "$work/m"
cat >"$work/m/adapter.toml" <<TOML
contract_version = "1.0.0"
[adapter]
kind = "steady"
name = "steady"
[lifecycle.start]
exec = "$PROBE"
args = ["--usage-lines", "$lines", "--usage-interval-ms", "$INTERVAL_MS", "--crash-after-ms",
        "$((RUN_SECONDS * 1000 + 500))", "--exit-code", "0", "--quiet"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
TOML
{
  echo '[fleet]'
  echo 'name = "steady"'
  for i in $(seq 1 "$AGENTS"); do
    printf '[agents.s-%d]\nmanifest = "m"\nstate = "running"\n' "$i"
    printf '[agents.s-%d.config]\nrestart.policy = "always"\n' "$i"
  done
} >"$work/fleet.toml"

"$KTESIOD" --state-dir "$work/state" --socket "$sock" --config "$work/ktesiod.toml" \
  --log-level info 2>"$work/ktesiod.log" &
daemon=$!
for _ in $(seq 1 100); do ctl daemon status >/dev/null 2>&1 && break; sleep 0.05; done
ctl apply -f "$work/fleet.toml" >/dev/null

accepted() {  # usage lines accepted: input tokens / 10
  ctl agent usage --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["total_input_tokens"] // 10)'
}
echo "t_s lines db_bytes wal_bytes run_dirs_disk_bytes"
first_db=0
first_lines=0
end=$((SECONDS + MINUTES * 60))
while ((SECONDS < end)); do
  sleep 15
  n=$(accepted)
  db=$(stat -c %s "$work/state/state.db")
  wal=$(stat -c %s "$work/state/state.db-wal" 2>/dev/null || echo 0)
  runs=$(du -sB1 "$work"/state/agents/*/run 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo "$SECONDS $n $db $wal $runs"
  if ((first_lines == 0)); then
    first_lines=$n
    first_db=$db
  fi
  last_lines=$n
  last_db=$db
  last_runs=$runs
done
echo "bytes_per_usage_line_in_state_db $(( first_lines > 0 ? first_db / first_lines : 0 ))"
echo "usage_lines_total $last_lines"
echo "state_db_bytes_final $last_db"
echo "run_dirs_disk_bytes_final $last_runs"
grep -c "retention: pruned" "$work/ktesiod.log" | sed 's/^/prune_passes_logged /' || true
