#!/usr/bin/env bash
# Installs what portkit needs to build and test on Debian 12: Debian packages that are missing,
# the pinned tree-sitter Python grammar (npm package, integrity-checked), and the torch 2.x test
# environment .venv-torch2/ (pinned wheels from PyPI, scripts/requirements-torch2.txt; the Python
# tests run under Debian's torch 1.13 and under it). PORTKIT_SKIP_TORCH2=1 leaves the latter out
# (its tests are then reported as skipped). The linters of scripts/lint.sh: clang-format from
# Debian, ruff pinned in a small tools environment .venv-tools/ (scripts/requirements-tools.txt).
# Idempotent: a second run with everything present does nothing.
#
#   scripts/setup.sh           everything `make test` needs
#   scripts/setup.sh --build   only what building the portkit binary needs (`make demo`): the
#                              compiler, the C++ libraries and the grammar; no torch, no test tools
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=all
[ "${1:-}" = --build ] && MODE=build

# What the portkit binary needs to configure and build (gtest and benchmark: CMake finds them when
# it configures the tree, though the demo builds neither tests nor benchmarks).
PACKAGES=(g++ cmake ninja-build make pkg-config
          libtree-sitter-dev libsimdjson-dev libcli11-dev libfmt-dev
          libsqlite3-dev zlib1g-dev libhdf5-dev libgtest-dev libgmock-dev libbenchmark-dev
          libtomlplusplus-dev)          # analyse's [tool.portkit] configuration file
if [ "$MODE" = all ]; then
  PACKAGES+=(clang libclang-rt-14-dev python3 python3-torch python3-numpy python3-pytest
             python3-h5py python3-venv python3-jsonschema libopenblas-dev
             clang-format                 # scripts/lint.sh, scripts/format.sh
             python3-pandas               # optional: portkit.prof.load's DataFrames (its test skips without)
             libopenmpi-dev openmpi-bin   # optional: prof cluster under mpirun; the build works without
             chromium)                     # optional: compare_report.html rendered in headless Chromium (test skips without)
fi

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
[ "$MODE" = build ] && exit 0

# The linters' environment (ruff, a few MB): recreated only when the pinned list changes.
TOOLS=.venv-tools
TOOLS_REQ=scripts/requirements-tools.txt
if ! { [ -x "$TOOLS/bin/ruff" ] && cmp -s "$TOOLS_REQ" "$TOOLS/portkit-requirements.txt"; }; then
  echo "setup: creating $TOOLS with $(cat "$TOOLS_REQ") from PyPI"
  rm -rf "$TOOLS"
  if ! /usr/bin/python3 -m venv "$TOOLS" ||
     ! "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check -r "$TOOLS_REQ"; then
    echo "setup: could not install the linters' environment $TOOLS (is PyPI reachable?)" >&2
    rm -rf "$TOOLS"
    exit 1
  fi
  cp "$TOOLS_REQ" "$TOOLS/portkit-requirements.txt"
fi

# torch 2.x test environment. PyPI's Linux x86_64 torch wheels depend on NVIDIA's CUDA wheels
# (about 3 GB; torch does not import without them), which are installed too although no GPU is
# needed: the tests run on the CPU. Recreated only when the pinned list changes.
VENV=.venv-torch2
REQ=scripts/requirements-torch2.txt
if [ "${PORTKIT_SKIP_TORCH2:-0}" != 1 ]; then
  if [ -x "$VENV/bin/python" ] && cmp -s "$REQ" "$VENV/portkit-requirements.txt"; then
    :  # up to date
  else
    echo "setup: creating $VENV with $(grep -m1 '^torch==' "$REQ") from PyPI (about 3 GB with its CUDA wheels; a few minutes)"
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ" ||
       ! "$VENV/bin/python" -c "import torch, numpy, pytest, h5py"; then
      echo "setup: could not install the torch 2.x test environment (is PyPI reachable?);" \
           "PORTKIT_SKIP_TORCH2=1 skips it, and its tests are then reported as skipped" >&2
      rm -rf "$VENV"
      exit 1
    fi
    cp "$REQ" "$VENV/portkit-requirements.txt"  # last: an interrupted set-up is redone next time
  fi
fi
