#!/usr/bin/env bash
# Installs what portkit needs to build and test on Debian 12: Debian packages that are missing,
# and the pinned tree-sitter Python grammar (npm package, integrity-checked).
# Idempotent: a second run with everything present does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(g++ cmake ninja-build make pkg-config
          libtree-sitter-dev libsimdjson-dev libcli11-dev libfmt-dev
          libsqlite3-dev zlib1g-dev libhdf5-dev libgtest-dev libgmock-dev libbenchmark-dev
          clang libclang-rt-14-dev python3 python3-torch python3-numpy python3-pytest
          python3-h5py libopenblas-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from a package other than Debian's (nodesource ships npm inside nodejs).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash scripts/fetch_grammar.sh
