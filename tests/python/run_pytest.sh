#!/usr/bin/env bash
# Runs the Python tests with an interpreter that has torch and pytest (Debian's python3-torch is
# installed for /usr/bin/python3; the python3 first on PATH may be another one without torch).
set -uo pipefail
PORTKIT_BIN=${1:?usage: run_pytest.sh PATH/TO/portkit}
export PORTKIT_BIN
shift
cd "$(dirname "$0")"
for py in "${PORTKIT_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import torch, pytest" >/dev/null 2>&1; then
    export PORTKIT_TEST_PYTHON="$py"
    exec "$py" -m pytest -q -p no:cacheprovider "$@" .
  fi
done
echo "no Python interpreter with torch and pytest found (make setup installs python3-torch and python3-pytest)" >&2
exit 1
