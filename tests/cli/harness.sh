# Shared set-up of the shell test scripts (sourced): the portkit binary from $1, the repository
# root as working folder, a temporary folder removed at exit, and `check NAME CONDITION`.
set -uo pipefail
PORTKIT=${1:?usage: $0 PATH/TO/portkit}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
check() {  # description, condition (a command line, evaluated)
  if eval "$2"; then pass=$((pass + 1)); echo "ok   $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}
