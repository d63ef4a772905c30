#!/usr/bin/env bash
# Formats the C++ sources in place with clang-format and the repository's .clang-format (Debian's
# clang-format 14, which scripts/setup.sh installs). Run it on a clean tree and commit the result
# on its own ("format: clang-format the tree"), apart from any other change.
#
#   scripts/format.sh            every C++ source (scripts/cxx_sources.sh)
#   scripts/format.sh FILE...    only these
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null || { echo "format: $CLANG_FORMAT not found; run scripts/setup.sh" >&2; exit 2; }
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(bash scripts/cxx_sources.sh)
fi
printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$CLANG_FORMAT" -i --style=file
echo "format: ${#files[@]} files formatted with $("$CLANG_FORMAT" --version | head -1)"
