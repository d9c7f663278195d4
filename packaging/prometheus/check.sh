#!/usr/bin/env bash
# The packaging_prometheus test: the shipped rules load (`promtool check rules`), every alert's
# unit tests pass (`promtool test rules`), and the dashboard is valid JSON whose every panel has
# at least one PromQL query. (The fleet test runs each of those queries against a real
# Prometheus.) Skipped (77) without promtool (Debian package `prometheus`).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v promtool >/dev/null; then
  echo "SKIPPED: promtool not installed (apt-get install prometheus; scripts/install-deps.sh does)"
  exit 77
fi
promtool check rules ktesio.rules.yml
promtool test rules ktesio.rules.test.yml
# Every alert in the rules has a unit test.
alerts=$(sed -n 's/^ *- alert: \([A-Za-z]*\)$/\1/p' ktesio.rules.yml | sort -u)
tested=$(sed -n 's/^ *alertname: \([A-Za-z]*\)$/\1/p' ktesio.rules.test.yml | sort -u)
untested=$(comm -23 <(echo "$alerts") <(echo "$tested"))
if [[ -n "$untested" ]]; then
  echo "alerts without a promtool unit test: $untested" >&2
  exit 1
fi
python3 - <<'PY'
import json
with open("ktesio-dashboard.json") as f:
    dashboard = json.load(f)
panels = dashboard["panels"]
assert panels, "the dashboard has no panels"
for panel in panels:
    exprs = [t.get("expr", "") for t in panel.get("targets", [])]
    assert exprs and all(exprs), f"panel {panel.get('title')!r} has no query"
print(f"dashboard: {len(panels)} panels, every one with a query")
PY
echo "packaging_prometheus: ok"
