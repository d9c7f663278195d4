#!/usr/bin/env bash
# Builds the container image from the project's own .deb and runs it, as far as this kind of
# machine allows (docs/fleet.md, Placement). Not part of ctest: it needs podman, debootstrap and
# network access to Debian's mirror, and several minutes.
#
#   packaging/container/check.sh BUILD_DIR     e.g. build/dev (a built tree: cpack packs it)
#
# Steps: cpack the .deb; debootstrap a minimal Debian 12 as the base image (no registry is
# reachable here); podman build (chroot isolation); podman run (runc, cgroupfs: the sandbox's
# hybrid cgroups defeat crun); then, inside: the example agent starts and echoes, /metrics and
# /healthz answer, a SIGKILLed ktesiod is started again by the entrypoint and re-adopts the agent
# with the same pid, and `podman stop` runs the ordered full stop and exits 0.
set -euo pipefail
build=${1:?usage: packaging/container/check.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/kt-image-XXXXXX)
export CONTAINERS_CONF=$work/containers.conf
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
P=(podman --runtime runc --cgroup-manager cgroupfs)
cleanup() { "${P[@]}" rm -f kt-check >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
apt-get install -y -qq --no-install-recommends podman runc debootstrap >/dev/null

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/deb" -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip >/dev/null 2>&1
cp -r "$here" "$work/ctx"
cp "$work"/deb/ktesio_*.deb "$work/ctx/ktesio.deb"
if ! podman image exists localhost/debian:12-slim; then
  debootstrap --variant=minbase bookworm "$work/root" http://deb.debian.org/debian >/dev/null
  tar -C "$work/root" -c . | podman import - localhost/debian:12-slim >/dev/null
fi
sed -i 's|^FROM debian:12-slim|FROM localhost/debian:12-slim|' "$work/ctx/Containerfile"
podman build --isolation chroot --network host -t ktesio:check "$work/ctx" >/dev/null 2>&1
echo "image: built from $(basename "$work"/deb/ktesio_*.deb)"

port=19466
"${P[@]}" run --network host -d --name kt-check -e KTESIO_METRICS_LISTEN=127.0.0.1:$port ktesio:check >/dev/null
inside() { "${P[@]}" exec kt-check "$@"; }
for _ in $(seq 1 50); do inside ktctl daemon status >/dev/null 2>&1 && break; sleep 0.2; done
inside ktctl agent register echo --manifest /usr/share/ktesio/examples/adapters/echo >/dev/null
inside ktctl agent start echo >/dev/null
inside ktctl agent send echo "hello from the image" >/dev/null
sleep 0.5
# Outputs are captured before grep: `grep -q` quitting early would fail a pipe under pipefail.
logs=$(inside ktctl agent logs echo)
grep -q "echo: hello from the image" <<<"$logs"
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null
metrics=$(curl -sf "http://127.0.0.1:$port/metrics")
grep -q '^ktesio_agent_state{agent="echo",state="running"} 1' <<<"$metrics"
echo "run: the example agent echoes; /metrics and /healthz answer"
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
agent=$(inside ktctl agent show echo --json | json '["instance"]["pid"]')
daemon=$(inside ktctl daemon status --json | json '["pid"]')
inside sh -c "kill -9 $daemon"
for _ in $(seq 1 50); do
  now=$(inside ktctl daemon status --json 2>/dev/null | json '["pid"]' 2>/dev/null || true)
  [[ -n "$now" && "$now" != "$daemon" ]] && break
  sleep 0.2
done
[[ "$(inside ktctl agent show echo --json | json '["instance"]["pid"]')" == "$agent" ]]
echo "crash: ktesiod $daemon SIGKILLed, $now started by the entrypoint, agent $agent re-adopted"
"${P[@]}" stop -t 60 kt-check >/dev/null
[[ "$("${P[@]}" inspect kt-check --format '{{.State.ExitCode}}')" == 0 ]]
logs=$("${P[@]}" logs kt-check 2>&1)
grep -q 'echo: stopped (stop-graceful)' <<<"$logs"
echo "stop: the ordered full stop ran and the container exited 0"
