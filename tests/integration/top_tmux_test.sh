#!/usr/bin/env bash
# `ktctl top` in a real terminal (docs/top.md): a private ktesiod with three probe agents, and
# ktctl top inside an 80×24 tmux pane. Checks that the view shows every agent, that `s` changes
# the sort, that a lifecycle event shows up without waiting for the (long) poll interval, and that
# q, Ctrl-C, SIGTERM and a vanished daemon all leave the terminal restored (icanon and echo back)
# with the documented exit status. Also checks the one-shot text and JSON when not a terminal.
#
# usage: top_tmux_test.sh KTESIOD KTCTL PROBE. Exit 77 (skip) only when tmux is missing.
set -euo pipefail

if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed"
  exit 77
fi
KTESIOD=$(realpath "$1")
KTCTL=$(realpath "$2")
PROBE=$(realpath "$3")

DIR=$(mktemp -d /tmp/kt-top-XXXXXX)
SOCK=$DIR/d.sock
TMUX_SOCK=$DIR/tmux.sock
DAEMON_PID=
fail() {
  echo "FAIL: $*" >&2
  echo "--- pane:" >&2
  tmux -S "$TMUX_SOCK" capture-pane -p -t top >&2 || true
  echo "--- tmux sessions:" >&2
  tmux -S "$TMUX_SOCK" list-sessions >&2 || true
  echo "--- ktctl top exit: $(cat "$DIR/exit.txt" 2>/dev/null || echo '(still running)')" >&2
  echo "--- daemon log (tail):" >&2
  tail -n 30 "$DIR/ktesiod.log" >&2 || true
  exit 1
}
cleanup() {
  tmux -S "$TMUX_SOCK" kill-server 2>/dev/null || true
  if [[ -n "$DAEMON_PID" ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    "$KTCTL" --socket "$SOCK" agent stop --all --timeout 0 >/dev/null 2>&1 || true
    kill "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT

ctl() { "$KTCTL" --socket "$SOCK" "$@"; }

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds.
wait_until() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.1
  done
}

pane() { tmux -S "$TMUX_SOCK" capture-pane -p -t top; }
pane_has() { pane | grep -qE -- "$1"; }
file_has() { [[ -f "$1" ]] && grep -qE -- "$2" "$1"; }

start_daemon() {
  "$KTESIOD" --state-dir "$DIR/state" --socket "$SOCK" >"$DIR/ktesiod.log" 2>&1 &
  DAEMON_PID=$!
  wait_until "the daemon to answer" 30 eval 'ctl daemon status >/dev/null 2>&1'
}

# Runs `ktctl top ARGS` in a fresh 80×24 pane, then records its exit status and the terminal
# modes after it returned. The wrapping bash writes its pid so the test can find ktctl (its child).
start_top() {
  rm -f "$DIR/exit.txt" "$DIR/stty.txt" "$DIR/bash.pid"
  tmux -S "$TMUX_SOCK" kill-session -t top 2>/dev/null || true
  cat >"$DIR/run.sh" <<EOF
echo \$\$ > "$DIR/bash.pid"
"$KTCTL" --socket "$SOCK" top $*
echo "EXIT=\$?" > "$DIR/exit.tmp"
stty -a > "$DIR/stty.txt"
mv "$DIR/exit.tmp" "$DIR/exit.txt"
sleep 600
EOF
  # Killing the last session ends the tmux server; a new-session racing with that exit can meet
  # the dying server ("server exited unexpectedly"): try again on a fresh server.
  local attempt
  for attempt in 1 2 3 4 5; do
    if tmux -S "$TMUX_SOCK" -f /dev/null new-session -d -s top -x 80 -y 24 "bash $DIR/run.sh"; then
      break
    fi
    ((attempt < 5)) || fail "tmux new-session failed 5 times"
    tmux -S "$TMUX_SOCK" kill-server 2>/dev/null || true
    sleep 0.2
  done
  wait_until "the view to list all three agents" 20 \
    eval 'pane_has "^alpha " && pane_has "^bravo " && pane_has "^charlie "'
}

# check_exit WANT: ktctl top exited with WANT and left icanon and echo on.
check_exit() {
  wait_until "ktctl top to exit" 15 test -f "$DIR/exit.txt"
  grep -qx "EXIT=$1" "$DIR/exit.txt" || fail "want EXIT=$1, got $(cat "$DIR/exit.txt")"
  grep -qE '(^|[ ;])icanon([ ;]|$)' "$DIR/stty.txt" || fail "icanon not restored: $(cat "$DIR/stty.txt")"
  grep -qE '(^|[ ;])echo([ ;]|$)' "$DIR/stty.txt" || fail "echo not restored: $(cat "$DIR/stty.txt")"
}

start_daemon
for name in alpha bravo charlie; do
  mkdir -p "$DIR/m-$name"
  cat >"$DIR/m-$name/adapter.toml" <<EOF
contract_version = "1.0.0"
[adapter]
kind = "probe"
[lifecycle.start]
exec = "$PROBE"
args = ["--heartbeat-ms", "500", "--usage-lines", "100", "--usage-interval-ms", "200"]
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
EOF
  ctl agent register "$name" --manifest "$DIR/m-$name" >/dev/null
  ctl agent start "$name" >/dev/null || fail "cannot start $name"
done

# One-shot when stdout is not a terminal: plain text, every agent, no escape sequences.
ctl top --once --interval 0.3 | cat >"$DIR/once.txt"
for name in alpha bravo charlie; do
  grep -qE "^$name +running" "$DIR/once.txt" || fail "one-shot lacks $name: $(cat "$DIR/once.txt")"
done
grep -q $'\x1b' "$DIR/once.txt" && fail "one-shot text holds escape sequences"
head -1 "$DIR/once.txt" | grep -q "^NAME" || fail "one-shot has no header: $(cat "$DIR/once.txt")"
ctl --json top --interval 0.3 | python3 -c '
import json, sys
doc = json.load(sys.stdin)
assert doc["schema_version"] == 1, doc
names = [i["name"] for i in doc["instances"]]
assert names == ["alpha", "bravo", "charlie"], names
for i in doc["instances"]:
    assert i["state"] == "running" and isinstance(i["cpu_percent"], float), i
    assert i["dollars"] is None and i["budget_remaining"] is None, i
' || fail "one-shot JSON"

# q: a long poll interval, so a state change can only arrive through the event stream.
start_top --interval 30
pane_has "sort:name" || fail "no sort indicator for name"
ctl agent stop alpha --timeout 5 >/dev/null
wait_until "the stop to show through the event stream" 10 pane_has "^alpha +stopped"
order() { pane | grep -oE '^(alpha|bravo|charlie) ' | tr -d ' ' | paste -sd, -; }
[[ "$(order)" == "alpha,bravo,charlie" ]] || fail "name order: $(order)"
tmux -S "$TMUX_SOCK" send-keys -t top s
wait_until "the state sort" 5 pane_has "sort:state"
wait_until "running before stopped" 5 eval '[[ "$(order)" == "bravo,charlie,alpha" ]]'
tmux -S "$TMUX_SOCK" send-keys -t top r
wait_until "the reversed sort" 5 eval '[[ "$(order)" == "alpha,charlie,bravo" ]]'
# The selector filter: `/`, text, Enter. A refused selector keeps the old one and shows the
# daemon's message in the status line (in place of the key help).
ctl agent label bravo team=b >/dev/null
tmux -S "$TMUX_SOCK" send-keys -t top / 'team=b' Enter
wait_until "the selector to apply" 5 eval '[[ "$(order)" == "bravo" ]] && pane_has "sel:team=b"'
tmux -S "$TMUX_SOCK" send-keys -t top / C-u 'team in (' Enter
wait_until "the refusal in the status line" 5 eval '! pane_has "q quit" && pane_has "team in \\("'
[[ "$(order)" == "bravo" ]] || fail "a refused selector replaced the old one: $(order)"
tmux -S "$TMUX_SOCK" send-keys -t top / C-u Enter
wait_until "the selector to clear" 5 eval '[[ "$(order)" == "alpha,charlie,bravo" ]]'
for line in $(seq 1 24); do
  (($(pane | sed -n "${line}p" | wc -m) <= 81)) || fail "line $line is wider than 80 columns"
done
tmux -S "$TMUX_SOCK" send-keys -t top q
check_exit 0
ctl agent start alpha >/dev/null

# Ctrl-C (a key in raw mode).
start_top
tmux -S "$TMUX_SOCK" send-keys -t top C-c
check_exit 0

# SIGTERM to the ktctl process: 128 + 15, like a shell reports it.
start_top
TOP_PID=$(pgrep -P "$(cat "$DIR/bash.pid")" -x ktctl) || fail "cannot find the ktctl process"
kill -TERM "$TOP_PID"
check_exit 143

# The daemon goes away: the terminal is restored, then `ktctl: ...` and exit 7.
start_top --interval 0.5
ctl agent stop --all --timeout 0 >/dev/null
kill "$DAEMON_PID"
wait "$DAEMON_PID" || true
DAEMON_PID=
check_exit 7
wait_until "the error on the normal screen" 5 pane_has "^ktctl: "

echo "PASS"
