#!/usr/bin/env bash
# Runs the Python tests under one torch:
#   run_pytest.sh PATH/TO/portkit torch1 [PYTEST ARGS...]   Debian's python3-torch (1.13), /usr/bin/python3
#   run_pytest.sh PATH/TO/portkit torch2 [PYTEST ARGS...]   the torch 2.x virtual environment .venv-torch2/
#                                                           that scripts/setup.sh creates; exit 77 (skipped)
#                                                           when it is absent
# PORTKIT_PYTHON overrides the interpreter of either. Prints which torch and Python ran.
set -uo pipefail
PORTKIT_BIN=${1:?usage: run_pytest.sh PATH/TO/portkit torch1|torch2 [PYTEST ARGS...]}
WHICH=${2:-torch1}
shift $(( $# >= 2 ? 2 : 1 ))
case "$PORTKIT_BIN" in /*) ;; *) PORTKIT_BIN=$(pwd)/$PORTKIT_BIN ;; esac
export PORTKIT_BIN
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SKIP=77

case "$WHICH" in
  torch1) candidates=("${PORTKIT_PYTHON:-}" /usr/bin/python3 python3) ;;
  torch2) candidates=("${PORTKIT_PYTHON:-}" "$ROOT/.venv-torch2/bin/python") ;;
  *) echo "run_pytest.sh: second argument must be torch1 or torch2, not '$WHICH'" >&2; exit 2 ;;
esac

for py in "${candidates[@]}"; do
  [ -n "$py" ] || continue
  command -v "$py" >/dev/null 2>&1 || continue
  version=$("$py" -c "import torch, pytest, sys; print(torch.__version__, 'on Python', sys.version.split()[0])" 2>/dev/null) || continue
  major=${version%%.*}
  if [ "$WHICH" = torch1 ] && [ "$major" != 1 ] && [ -z "${PORTKIT_PYTHON:-}" ]; then continue; fi
  if [ "$WHICH" = torch2 ] && [ "$major" = 1 ]; then
    echo "run_pytest.sh: $py has torch $version, not 2.x" >&2; exit 1
  fi
  echo "pytest under torch $version ($py)"
  export PORTKIT_TEST_PYTHON="$py"
  cd "$HERE"
  exec "$py" -m pytest -q -p no:cacheprovider "$@" .
done

if [ "$WHICH" = torch2 ]; then
  echo "SKIPPED: no torch 2.x environment ($ROOT/.venv-torch2; scripts/setup.sh creates it)"
  exit $SKIP
fi
echo "no Python interpreter with torch 1.x and pytest found (scripts/setup.sh installs python3-torch and python3-pytest)" >&2
exit 1
