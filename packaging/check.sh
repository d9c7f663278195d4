#!/usr/bin/env bash
# Checks the service files: the systemd unit with `systemd-analyze verify` (ExecStart pointed at
# the built daemon) plus the settings agents depend on, and every launchd plist as well-formed
# XML carrying the keys launchd needs. Usage: packaging/check.sh PATH_TO_KTESIOD
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ktesiod=$1
work=$(mktemp -d /tmp/kt-pkg-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "packaging: $*" >&2; exit 1; }

unit=$here/systemd/ktesiod.service
sed "s|^ExecStart=/usr/bin/ktesiod|ExecStart=$ktesiod|" "$unit" >"$work/ktesiod.service"
SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$work/ktesiod.service" 2>"$work/verify.log" ||
  { cat "$work/verify.log" >&2; fail "systemd-analyze verify rejected ktesiod.service"; }
if grep -q . "$work/verify.log"; then
  cat "$work/verify.log" >&2
  fail "systemd-analyze verify warned about ktesiod.service"
fi
for line in "Type=notify" "KillMode=process" "ExecStart=/usr/bin/ktesiod --system" \
            "StateDirectory=ktesio" "RuntimeDirectory=ktesio" "User=ktesio"; do
  grep -qx "$line" "$unit" || fail "ktesiod.service lacks '$line'"
done
socket=$here/systemd/ktesiod.socket
cp "$socket" "$work/ktesiod.socket"
SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$work/ktesiod.socket" "$work/ktesiod.service" \
  2>"$work/verify-socket.log" ||
  { cat "$work/verify-socket.log" >&2; fail "systemd-analyze verify rejected ktesiod.socket"; }
if grep -q . "$work/verify-socket.log"; then
  cat "$work/verify-socket.log" >&2
  fail "systemd-analyze verify warned about ktesiod.socket"
fi
for line in "ListenStream=/run/ktesio/ktesiod.sock" "SocketGroup=ktesio" "SocketMode=0660"; do
  grep -qx "$line" "$socket" || fail "ktesiod.socket lacks '$line'"
done
# The fleet unit: ktctl pointed at the built binary (systemd-analyze checks it is executable).
ktctl=$(dirname "$ktesiod")/../ktctl/ktctl
agents=$here/systemd/ktesio-agents.service
sed "s|/usr/bin/ktctl|$(cd "$(dirname "$ktctl")" && pwd)/ktctl|" "$agents" >"$work/ktesio-agents.service"
SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$work/ktesio-agents.service" \
  "$work/ktesiod.service" 2>"$work/verify-agents.log" ||
  { cat "$work/verify-agents.log" >&2; fail "systemd-analyze verify rejected ktesio-agents.service"; }
if grep -q . "$work/verify-agents.log"; then
  cat "$work/verify-agents.log" >&2
  fail "systemd-analyze verify warned about ktesio-agents.service"
fi
for line in "After=ktesiod.service" "Wants=ktesiod.service" "RemainAfterExit=yes" \
            "ExecStop=/usr/bin/ktctl --socket /run/ktesio/ktesiod.sock agent stop --all"; do
  grep -qx "$line" "$agents" || fail "ktesio-agents.service lacks '$line'"
done
grep -q "^Requires=\|^BindsTo=\|^PartOf=" "$agents" &&
  fail "ktesio-agents.service must not propagate daemon restarts (Requires/BindsTo/PartOf)"
grep -q '^u ktesio ' "$here/systemd/ktesio.sysusers" || fail "sysusers snippet lacks the user"
grep -q '^g ktesio ' "$here/systemd/ktesio.sysusers" || fail "sysusers snippet lacks the group"

for plist in "$here"/launchd/*.plist; do
  xmllint --noout "$plist" || fail "$plist is not well-formed XML"
  for key in Label ProgramArguments RunAtLoad KeepAlive ThrottleInterval StandardErrorPath \
             AbandonProcessGroup; do
    grep -q "<key>$key</key>" "$plist" || fail "$(basename "$plist") lacks $key"
  done
done
echo "packaging: systemd units and launchd plists check out"
