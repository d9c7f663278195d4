#!/usr/bin/env bash
# Compiles the Windows-only service sources with the Debian mingw-w64 cross compiler and links
# the stand-in service (service_host_check.exe), checking the result is a PE console executable
# that imports the SCM entry points. Skips (exit 77) when the cross compiler is not installed.
# Usage: packaging/windows-service/check.sh SOURCE_ROOT
set -euo pipefail
root=$1
here=$root/packaging/windows-service
cxx=$(command -v x86_64-w64-mingw32-g++-posix || command -v x86_64-w64-mingw32-g++ || true)
if [[ -z $cxx ]]; then
  echo "windows-service: x86_64-w64-mingw32-g++ not installed (apt install g++-mingw-w64-x86-64-posix)"
  exit 77
fi
work=$(mktemp -d /tmp/kt-win-XXXXXX)
trap 'rm -rf "$work"' EXIT
flags=(-std=c++20 -O1 -Wall -Wextra -Wpedantic -Wshadow -Werror -I"$root/ktesiod" -I"$here")
"$cxx" "${flags[@]}" -c "$here/service_host_win.cc" -o "$work/service_host_win.o"
"$cxx" "${flags[@]}" -c "$here/service_host_check.cc" -o "$work/service_host_check.o"
"$cxx" -static -o "$work/service_host_check.exe" "$work/service_host_win.o" \
  "$work/service_host_check.o" -ladvapi32
file_type=$(file -b "$work/service_host_check.exe")
[[ $file_type == *"PE32+ executable (console) x86-64"* ]] ||
  { echo "windows-service: unexpected binary type: $file_type" >&2; exit 1; }
imports=$(x86_64-w64-mingw32-objdump -p "$work/service_host_check.exe")
for fn in StartServiceCtrlDispatcherW RegisterServiceCtrlHandlerExW SetServiceStatus \
          SetConsoleCtrlHandler; do
  grep -q "$fn" <<<"$imports" || { echo "windows-service: $fn not imported" >&2; exit 1; }
done
echo "windows-service: service host compiled and linked ($file_type)"
