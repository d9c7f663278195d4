#!/usr/bin/env bash
# Installs the real agents the end-to-end metering tests drive (opencode, Codex) from the npm
# registry into build/agents, pinned to the versions those tests were validated with. Idempotent.
# Never fails the build: when npm or the registry is unreachable it says so, and the e2e tests
# report themselves skipped with the reason.
set -uo pipefail
cd "$(dirname "$0")/.."

OPENCODE_VERSION=1.18.33
CODEX_VERSION=0.171.0
prefix=build/agents
bin=$prefix/node_modules/.bin

have() {
  [[ -x $bin/opencode && -x $bin/codex ]] &&
    [[ "$("$bin/opencode" --version 2>/dev/null)" == "$OPENCODE_VERSION" ]] &&
    [[ "$("$bin/codex" --version 2>/dev/null)" == "codex-cli $CODEX_VERSION" ]]
}

if have; then
  echo "install-agents: opencode $OPENCODE_VERSION and codex $CODEX_VERSION present"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  mkdir -p "$prefix"
  echo "npm is not installed" > "$prefix/unavailable"
  echo "install-agents: npm is not installed; the real-agent e2e tests will be skipped"
  exit 0
fi
mkdir -p "$prefix"
rm -f "$prefix/unavailable"
if ! timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix "$prefix" \
    "opencode-ai@$OPENCODE_VERSION" "@openai/codex@$CODEX_VERSION" >"$prefix/npm.log" 2>&1; then
  echo "npm install failed (registry unreachable?): $(tail -n 3 "$prefix/npm.log" | tr '\n' ' ')" \
    > "$prefix/unavailable"
  echo "install-agents: $(cat "$prefix/unavailable"); the real-agent e2e tests will be skipped"
  exit 0
fi
if ! have; then
  echo "installed agents do not report the pinned versions" > "$prefix/unavailable"
  echo "install-agents: $(cat "$prefix/unavailable")"
  exit 0
fi
echo "install-agents: installed opencode $OPENCODE_VERSION and codex $CODEX_VERSION"
