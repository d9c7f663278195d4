#!/usr/bin/env bash
# A fuzz campaign: builds the libFuzzer targets (the clang `fuzz` preset, ASan) and runs every
# one of them in turn for SECONDS (default 300) over a scratch copy of its checked-in corpus,
# then prints per target the executions, the new corpus entries and the crashes. A crash leaves
# its input in build/fuzz/findings/<target>/ and fails the script: add the input to
# tests/fuzz/corpus/<target>/ (the corpora are replayed by every build's test suite) with the fix.
#
# FUZZ_RUNS=N stops each target after N executions (SECONDS stays the upper bound), so one
# campaign can prove a per-target execution count:
#
#   scripts/fuzz.sh [SECONDS]          FUZZ_JOBS=2 scripts/fuzz.sh 600
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 3600
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
seconds=${1:-300}
jobs=${FUZZ_JOBS:-1}
runs_cap=()
if [[ -n ${FUZZ_RUNS:-} ]]; then
  runs_cap=(-runs="$FUZZ_RUNS")
fi

KTESIO_INSTALL_FUZZ=1 scripts/install-deps.sh >/dev/null
cmake --preset fuzz >/dev/null
targets=(manifest usage_line toml_document fleet_file usage_extract)
cmake --build --preset fuzz --target "${targets[@]/#/fuzz_}" >/dev/null

failed=0
for target in "${targets[@]}"; do
  bin=build/fuzz/tests/fuzz/fuzz_$target
  work=$(mktemp -d /tmp/kt-fuzz-XXXXXX)
  findings=build/fuzz/findings/$target
  mkdir -p "$findings"
  mkdir -p "$work/corpus"
  cp -r "tests/fuzz/corpus/$target/." "$work/corpus/"
  seeds=$(find "$work/corpus" -type f | wc -l)
  log=build/fuzz/findings/$target.log
  parallel=()
  if ((jobs > 1)); then
    parallel=(-jobs="$jobs" -workers="$jobs")  # each worker logs to fuzz-N.log in $work/logs
  fi
  mkdir -p "$work/logs"
  started=$(date +%s)
  touch "$work/started"
  set +e
  (cd "$work/logs" && "$OLDPWD/$bin" "$work/corpus" -max_total_time="$seconds" "${runs_cap[@]}" \
    "${parallel[@]}" \
    -artifact_prefix="$OLDPWD/$findings/" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048) \
    >"$log" 2>&1
  rc=$?
  set -e
  logs=("$log" "$work"/logs/fuzz-*.log)  # nullglob: the worker logs when there are some
  runs=$(awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}' "${logs[@]}")
  # Only this run's findings count (earlier ones are in the corpora already).
  crashes=$(find "$findings" -maxdepth 1 -type f -newer "$work/started" \( -name 'crash-*' \
    -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  entries=$(find "$work/corpus" -type f | wc -l)
  took=$(( $(date +%s) - started ))
  echo "fuzz_$target: ${runs} executions in ${took} s, corpus ${seeds} -> ${entries}," \
    "${crashes} crashes (exit ${rc})"
  rm -rf "$work"
  if ((crashes > 0 || rc != 0)); then
    failed=1
    echo "  findings in $findings/, log in $log" >&2
  fi
done
exit "$failed"
