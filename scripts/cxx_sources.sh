#!/usr/bin/env bash
# Prints the C++ sources that scripts/lint.sh checks and scripts/format.sh formats, one a line:
# the project's own .cc/.h files under src/, tests/ and bench/ (tracked by git; third_party/ and
# generated files are not the project's).
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -- 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h'
else
  find src tests bench -type f \( -name '*.cc' -o -name '*.h' \) | sort
fi
