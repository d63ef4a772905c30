#!/usr/bin/env bash
# The README's exit-code table, checked command by command: every row of exit_codes.txt runs one
# portkit command line and expects one exit code. Rows are grouped by command so that each
# command is tried with a missing input, an unwritable output, a bad option value, a corrupt
# input and, where it has one, its findings or regression gate.
#
# Placeholders in a row: @TMP@ a fresh empty folder for that row, @MISSING@ a path that does not
# exist, @UNWRITABLE@ an output path that cannot be created (/proc), @CORRUPT@ a file of random
# bytes named corrupt.bin, @CORRUPT_JSON@ a truncated JSON file, @EMPTYDIR@ an empty folder,
# @COPY:path@ a fresh copy of the repository's file or folder `path` (in a folder of its own, so
# outputs written beside it stay in the row's folder), @IMPORTED:path@ the same copy after
# `portkit prof import` (a profile folder with portkit.db).
source "$(dirname "$0")/harness.sh"
table="tests/cli/exit_codes.txt"
row=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  row=$((row + 1))
  expected=$(printf '%s' "$line" | cut -d'|' -f1 | tr -d ' ')
  what=$(printf '%s' "$line" | cut -d'|' -f2 | sed 's/^ *//; s/ *$//')
  cmd=$(printf '%s' "$line" | cut -d'|' -f3- | sed 's/^ *//')
  d="$tmp/row$row"
  mkdir -p "$d/empty"
  head -c 4096 /dev/urandom > "$d/corrupt.bin"
  printf '{"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "du' > "$d/corrupt.json"
  cmd=${cmd//@TMP@/$d}
  cmd=${cmd//@MISSING@/$d/missing}
  cmd=${cmd//@UNWRITABLE@//proc/portkit-unwritable/out}
  cmd=${cmd//@CORRUPT_JSON@/$d/corrupt.json}
  cmd=${cmd//@CORRUPT@/$d/corrupt.bin}
  cmd=${cmd//@EMPTYDIR@/$d/empty}
  copies=0
  while [[ $cmd =~ @(COPY|IMPORTED):([^@]+)@ ]]; do
    copies=$((copies + 1))
    copy="$d/copy$copies"
    mkdir -p "$copy"
    if [ -d "${BASH_REMATCH[2]}" ]; then cp -r "${BASH_REMATCH[2]}"/. "$copy/"; else cp "${BASH_REMATCH[2]}" "$copy/"; fi
    [ "${BASH_REMATCH[1]}" = IMPORTED ] && "$PORTKIT" prof import -dir "$copy" >/dev/null 2>&1
    cmd=${cmd/"${BASH_REMATCH[0]}"/$copy}
  done
  eval "timeout 300 \"\$PORTKIT\" $cmd" >"$d/stdout" 2>"$d/stderr" </dev/null
  rc=$?
  if [ "$rc" = "$expected" ]; then
    pass=$((pass + 1)); echo "ok   [$rc] $what: portkit $cmd"
  else
    fail=$((fail + 1)); echo "FAIL [$rc, expected $expected] $what: portkit $cmd"
    sed 's/^/     | /' "$d/stderr" | tail -5
  fi
  # An error exit names what went wrong on stderr.
  if [ "$rc" -ge 2 ] && [ ! -s "$d/stderr" ]; then
    fail=$((fail + 1)); echo "FAIL $what: exit $rc with nothing on stderr"
  fi
done < "$table"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
