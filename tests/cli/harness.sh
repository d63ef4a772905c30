# Shared set-up of the shell test scripts (sourced): the portkit binary from $1, the repository
# root as working folder, a temporary folder removed at exit, and `check NAME CONDITION`.
set -uo pipefail
PORTKIT=${1:?usage: $0 PATH/TO/portkit}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
# rss_ok VALUE LIMIT: VALUE < LIMIT (a peak-memory bound). Bounds hold for the release build; under
# AddressSanitizer (`make test-sanitize` sets PORTKIT_SANITIZED=1) shadow memory and the allocator's
# quarantine multiply the RSS, so there the bound is reported, not checked.
rss_ok() {
  if [ "${PORTKIT_SANITIZED:-0}" = 1 ]; then
    echo "     (peak RSS $1 against the bound $2 not checked under the sanitizers)"
    return 0
  fi
  [ "$1" -lt "$2" ]
}

check() {  # description, condition (a command line, evaluated)
  if eval "$2"; then pass=$((pass + 1)); echo "ok   $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}
