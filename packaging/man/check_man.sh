#!/usr/bin/env bash
# The generated man pages render without warnings and name every command `ktctl --help` lists.
set -euo pipefail
dir=$1
ktctl=$2
for page in "$dir/ktctl.1" "$dir/ktesiod.8"; do
  [[ -s $page ]] || { echo "man: $page missing" >&2; exit 1; }
  if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1 || true)
    [[ -z $warnings ]] || { echo "man: $page: $warnings" >&2; exit 1; }
  fi
done
rendered=$(MANWIDTH=200 man -l "$dir/ktctl.1" 2>/dev/null | col -b 2>/dev/null ||
           groff -man -Tascii "$dir/ktctl.1" | col -b)
missing=0
while read -r cmd; do
  [[ -z $cmd ]] && continue
  grep -qF -- "$cmd" <<<"$rendered" || { echo "man: ktctl.1 lacks '$cmd'" >&2; missing=1; }
done < <("$ktctl" --help | awk '/^  [a-z]/ {print $1" "$2}' | sed 's/ [A-Z(\[-].*//; s/ *$//')
exit $missing
