#!/usr/bin/env bash
# Formats every tracked C++ source and proto in place.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cc' '*.h' '*.proto' | grep -v '^tests/fuzz/corpus/' | xargs clang-format -i --style=file
