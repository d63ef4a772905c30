#!/usr/bin/env bash
# The linters CI runs (`make lint`, from .ci/run): ruff on the Python companion (python/, with the
# configuration in python/pyproject.toml and the ruff pinned in scripts/requirements-tools.txt),
# and clang-format on the C++ sources (.clang-format; scripts/format.sh applies it).
# Exit 0 when clean, 1 with the findings otherwise, 2 when a linter is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

# The switch for the C++ format check. 1 (the tree is formatted): a file clang-format would change
# fails the lint. 0: clang-format only says how many files it would change.
ENFORCE_CLANG_FORMAT=1

RUFF=${RUFF:-.venv-tools/bin/ruff}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
status=0

if [ -x "$RUFF" ] || command -v "$RUFF" >/dev/null 2>&1; then
  echo "lint: $("$RUFF" --version) check python/"
  "$RUFF" check --no-cache python/ || status=1
else
  echo "lint: ruff not found at $RUFF; run scripts/setup.sh (it creates .venv-tools/)" >&2
  exit 2
fi

if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "lint: $CLANG_FORMAT not found; run scripts/setup.sh (Debian's clang-format)" >&2
  exit 2
fi
mapfile -t files < <(bash scripts/cxx_sources.sh)
report=$(mktemp)
trap 'rm -f "$report"' EXIT
# One clang-format per 50 files; each line it would change is a "FILE:LINE:COL: error: ..." line.
printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$CLANG_FORMAT" --style=file --dry-run --Werror >"$report" 2>&1
mapfile -t unformatted < <(grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$report" | cut -d: -f1 | sort -u)
if [ ${#unformatted[@]} -eq 0 ]; then
  echo "lint: clang-format: all ${#files[@]} C++ files formatted"
elif [ "$ENFORCE_CLANG_FORMAT" = 1 ]; then
  cat "$report"
  echo "lint: clang-format: ${#unformatted[@]} of ${#files[@]} C++ files are not formatted; scripts/format.sh FILE... formats them" >&2
  status=1
else
  echo "lint: clang-format: ${#unformatted[@]} of ${#files[@]} C++ files would change (not enforced yet:" \
       "ENFORCE_CLANG_FORMAT=0 in scripts/lint.sh)"
fi
exit $status
