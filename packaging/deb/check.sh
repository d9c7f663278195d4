#!/usr/bin/env bash
# The Debian package, end to end, without touching this machine's own system: build the .deb
# with CPack from BUILD_DIR, check its metadata and contents, install it with dpkg into a scratch
# root (maintainer scripts run chrootless with $DPKG_ROOT, so postinst really creates the ktesio
# user and /var/lib/ktesio there), start the installed daemon the way its unit does (system
# mode, as the ktesio user, Type=notify), drive it with the installed ktctl and an installed
# example agent, stop it, then remove the package. Must run as root (dpkg --root, setpriv);
# exits 77 (skipped) otherwise. Usage: packaging/deb/check.sh BUILD_DIR
set -euo pipefail
build=$1
[[ $(id -u) == 0 ]] || { echo "deb: needs root (dpkg --root, setpriv)"; exit 77; }
for tool in cpack dpkg dpkg-deb setpriv socat; do
  command -v "$tool" >/dev/null || { echo "deb: $tool not installed"; exit 77; }
done
work=$(mktemp -d /tmp/kt-deb-XXXXXX)
daemon=
cleanup() {
  [[ -n "$daemon" ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  pkill -9 -f "$work/root/usr/bin/ktesio-shim" 2>/dev/null || true
  pkill -9 -f "$work/root/usr/bin/ktesio-probe" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deb: $*" >&2; exit 1; }

# 1. Build the package.
# gzip instead of the release xz: the same package, built in seconds even from a sanitizer build
# (xz took ~3 minutes of the ASan suite).
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" \
  -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$work"/out/ktesio_*_amd64.deb 2>/dev/null | head -1)
[[ -f $deb ]] || { cat "$work/cpack.log" >&2; fail "no .deb produced"; }

# 2. Metadata and contents.
info=$(dpkg-deb --info "$deb")
for field in "Package: ktesio" "Section: admin" "Recommends: systemd"; do
  grep -q "^ $field" <<<"$info" || fail "control lacks '$field'"
done
grep -q "^ Depends: .*libgrpc++" <<<"$info" || fail "Depends lacks the gRPC runtime: $info"
contents=$(dpkg-deb --contents "$deb" | awk '{print $6}')
for f in usr/bin/ktesiod usr/bin/ktctl usr/bin/ktesio-shim usr/bin/ktesio-tck \
         usr/lib/systemd/system/ktesiod.service usr/lib/systemd/system/ktesiod.socket \
         usr/lib/systemd/system/ktesio-agents.service usr/lib/sysusers.d/ktesio.conf \
         usr/lib/tmpfiles.d/ktesio.conf usr/share/man/man1/ktctl.1 usr/share/man/man8/ktesiod.8 \
         usr/share/bash-completion/completions/ktctl \
         usr/share/doc/ktesio/operations.md usr/share/ktesio/examples/adapters/echo/adapter.toml; do
  grep -qx "./$f" <<<"$contents" || fail "package lacks /$f"
done

# 3. Install into a scratch root: an empty dpkg database and /etc (base-passwd's place).
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status"
# --force-depends: the scratch database knows none of the shared libraries this machine has.
dpkg --root="$root" --force-script-chrootless --force-depends -i "$deb" >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
dpkg --root="$root" -s ktesio | grep -q "^Status: install ok installed" || fail "not installed"
uid=$(awk -F: '$1 == "ktesio" {print $3}' "$root/etc/passwd")
gid=$(awk -F: '$1 == "ktesio" {print $3}' "$root/etc/group")
[[ -n $uid && -n $gid ]] || fail "postinst did not create the ktesio user and group"
[[ $(stat -c '%a %u' "$root/var/lib/ktesio") == "700 $uid" ]] ||
  fail "postinst did not create /var/lib/ktesio 0700 ktesio"

# 4. Start the installed daemon as its unit does: ExecStart, its Environment= lines,
#    User/Group=ktesio, a runtime directory, Type=notify (a datagram socket stands in for
#    systemd's).
unit=$root/usr/lib/systemd/system/ktesiod.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[[ $exec_start == "/usr/bin/ktesiod --system" ]] || fail "unexpected ExecStart: $exec_start"
read -ra start <<<"$exec_start"
mapfile -t unit_env < <(sed -n 's/^Environment=//p' "$unit")
[[ " ${unit_env[*]} " == *" LD_BIND_NOW=1 "* ]] || fail "the unit does not bind the daemon eagerly"
# An operator's config file (the package ships none: every key has a default).
printf 'version = 1\nstop_timeout_secs = 5\n' >"$root/etc/ktesio/ktesiod.toml"
mkdir -p "$root/run/ktesio"
chown "$uid:$gid" "$root/run/ktesio"
chmod 0750 "$root/run/ktesio"
sock=$root/run/ktesio/ktesiod.sock
notify=$work/notify.sock
socat -u "UNIX-RECVFROM:$notify,fork" "OPEN:$work/notify.log,creat,append" &
relay=$!
trap 'kill $relay 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 100); do [[ -S $notify ]] && break; sleep 0.05; done
chmod 0777 "$work" && chmod 0666 "$notify"
env "${unit_env[@]}" NOTIFY_SOCKET=$notify PATH="$root/usr/bin:/usr/bin:/bin" \
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
  "$root${start[0]}" "${start[@]:1}" --state-dir "$root/var/lib/ktesio" --socket "$sock" \
  --config "$root/etc/ktesio/ktesiod.toml" --socket-group "$gid" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 1 100); do grep -q "READY=1" "$work/notify.log" 2>/dev/null && break; sleep 0.05; done
grep -q "READY=1" "$work/notify.log" 2>/dev/null ||
  { cat "$work/daemon.log" >&2; fail "the installed daemon never notified READY=1"; }
grep -q "mode=system" "$work/daemon.log" || fail "daemon not in system mode"
[[ $(stat -c '%a %g' "$sock") == "660 $gid" ]] || fail "socket is not 0660 group ktesio"

# 5. Drive it with the installed ktctl (as root, which the daemon always admits).
ctl() { "$root/usr/bin/ktctl" --socket "$sock" "$@"; }
ctl daemon status >/dev/null || fail "installed ktctl cannot reach the installed daemon"
ctl agent register echo --manifest "$root/usr/share/ktesio/examples/adapters/echo" >/dev/null ||
  { cat "$work/daemon.log" >&2; fail "register from the installed example failed"; }
ctl agent start echo >/dev/null || { cat "$work/daemon.log" >&2; fail "start failed"; }
ctl agent send echo "packaged" >/dev/null
for _ in $(seq 1 100); do ctl agent logs echo | grep -q "packaged" && break; sleep 0.05; done
ctl agent logs echo | grep -q "packaged" || fail "the echo agent did not answer"
ctl agent stop --all >/dev/null || fail "agent stop --all failed"
kill -TERM "$daemon"
wait "$daemon" || fail "the installed daemon did not exit 0 on SIGTERM"
daemon=
grep -q "STOPPING=1" "$work/notify.log" || fail "no STOPPING=1 notification"

# 6. Remove: binaries go, the state stays (docs/operations.md, Uninstalling).
dpkg --root="$root" --force-script-chrootless -r ktesio >"$work/dpkg-r.log" 2>&1 ||
  { cat "$work/dpkg-r.log" >&2; fail "dpkg -r failed"; }
[[ ! -e $root/usr/bin/ktesiod ]] || fail "ktesiod left behind after removal"
[[ -d $root/var/lib/ktesio/agents/echo ]] || fail "removal deleted the state"
echo "deb: $(basename "$deb") builds, installs (postinst: user, state dir), starts, serves, removes"
