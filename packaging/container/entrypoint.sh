#!/bin/sh
# The container's main process (under tini): runs ktesiod and starts it again when it exits —
# agents keep running under their ktesio-shim meanwhile and the new daemon re-adopts them, as
# `Restart=on-failure` with `KillMode=process` does under systemd. On SIGTERM or SIGINT (the
# container is stopped): the ordered full stop — every agent stopped gracefully while the daemon
# still serves (`ktctl agent stop --all`), then the daemon — and exit 0.
#
# Environment: KTESIO_STATE_DIR, KTESIO_SOCKET (read by ktesiod and ktctl), KTESIO_METRICS_LISTEN
# (passed as --metrics-listen; empty: off), KTESIOD, KTCTL (binaries; default from PATH),
# KTESIO_RESTART_DELAY (seconds between daemon runs, default 1). Extra arguments go to ktesiod.
set -u
ktesiod=${KTESIOD:-ktesiod}
ktctl=${KTCTL:-ktctl}
delay=${KTESIO_RESTART_DELAY:-1}
mkdir -p "$(dirname "${KTESIO_SOCKET:-/run/ktesio/ktesiod.sock}")"
stopping=0
daemon=0

full_stop() {
  stopping=1
  if [ "$daemon" -ne 0 ] && kill -0 "$daemon" 2>/dev/null; then
    "$ktctl" agent stop --all >&2 || echo "entrypoint: agent stop --all failed" >&2
    kill -TERM "$daemon" 2>/dev/null
    wait "$daemon"
  fi
  exit 0
}
trap full_stop TERM INT

while :; do
  if [ -n "${KTESIO_METRICS_LISTEN:-}" ]; then
    LD_BIND_NOW=1 "$ktesiod" --metrics-listen "$KTESIO_METRICS_LISTEN" "$@" &
  else
    LD_BIND_NOW=1 "$ktesiod" "$@" &
  fi
  daemon=$!
  wait "$daemon"
  status=$?
  [ "$stopping" -eq 1 ] && exit 0
  echo "entrypoint: ktesiod exited with status $status; starting it again in ${delay}s" >&2
  sleep "$delay"
done
