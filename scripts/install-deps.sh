#!/usr/bin/env bash
# Installs the Debian 12 packages Ktesio builds and tests with. Idempotent and non-interactive:
# packages already present are skipped; apt runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libtomlplusplus-dev libsqlite3-dev
  libboost-dev libboost-filesystem-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libssl-dev
  clang-format clang-tidy python3 python3-grpcio python3-protobuf socat procps tmux
  systemd libxml2-utils bc file g++-mingw-w64-x86-64-posix
  prometheus prometheus-alertmanager curl python3-yaml
)
# npm installs the real agents of the e2e tests; a Node.js from elsewhere (e.g. NodeSource) is
# used as is, Debian's is installed only when there is none.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi
if [[ "${KTESIO_INSTALL_FUZZ:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
