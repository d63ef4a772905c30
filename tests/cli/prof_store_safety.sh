#!/usr/bin/env bash
# The profile store under `prof import` (docs/prof.md, "import"): two imports into one store at
# once both succeed (the second waits for the first's trace, no stale string ids, every error
# path ends its transaction); folder imports skip non-traces with a note and never skip a trace
# whose traceEvents comes late in the file; traces whose files were deleted leave the store on
# re-import; a copy under another name is warned about; out-of-range numbers are reported and not
# stored.
source "$(dirname "$0")/harness.sh"
traces=tests/data/traces/kineto
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

# Per trace: events, marks; and the count of events whose name has no string (stale ids).
summary() {
  $py - "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for path, events, marks in db.execute(
        "SELECT t.path, (SELECT COUNT(*) FROM events e WHERE e.trace = t.id),"
        " (SELECT COUNT(*) FROM marks m WHERE m.trace = t.id) FROM traces t ORDER BY t.path"):
    print(path, events, marks)
(dangling,) = db.execute("SELECT COUNT(*) FROM events e LEFT JOIN strings s ON s.id = e.name WHERE s.id IS NULL").fetchone()
print("dangling", dangling)
EOF
}

# --- Concurrent imports ------------------------------------------------------------------------
set4() {
  mkdir -p "$1"
  cp "$traces/cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz" \
     "$traces/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz" \
     "$traces/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz" \
     "$traces/timeline_analysis__sampled_rank-0.json.gz" "$1/"
}
set4 "$tmp/ref"
"$PORTKIT" prof import -dir "$tmp/ref" >/dev/null 2>"$tmp/ref.err"
check "reference import exits 0" "[ $? = 0 ]"
summary "$tmp/ref/portkit.db" >"$tmp/ref.sum"
check "reference store has 4 traces and no dangling names" \
  "[ \$(grep -c json.gz '$tmp/ref.sum') = 4 ] && grep -qx 'dangling 0' '$tmp/ref.sum'"
for round in 1 2 3 4 5; do
  d="$tmp/conc$round"
  set4 "$d"
  # Two whole-folder imports and a one-file import, started together.
  "$PORTKIT" prof import -dir "$d" >"$d.a.out" 2>"$d.a.err" &
  a=$!
  "$PORTKIT" prof import -dir "$d" >"$d.b.out" 2>"$d.b.err" &
  b=$!
  "$PORTKIT" prof import -dir "$d/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz" >"$d.c.out" 2>"$d.c.err" &
  c=$!
  wait $a; ra=$?
  wait $b; rb=$?
  wait $c; rc=$?
  check "round $round: three concurrent imports all exit 0 ($ra $rb $rc)" "[ $ra = 0 ] && [ $rb = 0 ] && [ $rc = 0 ]"
  check "round $round: no transaction or UNIQUE error" \
    "! grep -Eqi 'UNIQUE constraint|within a transaction|database is locked' '$d.a.err' '$d.b.err' '$d.c.err'"
  summary "$d/portkit.db" >"$d.sum"
  check "round $round: the store equals one import's" "cmp -s '$tmp/ref.sum' '$d.sum'"
  check "round $round: no crash marker left" "! ls -a '$d' | grep -q '^.portkit-import'"
  # The first import built the new store aside (portkit.db.new-<pid>) while the others waited.
  check "round $round: no temporary store left" "! ls -a '$d' | grep -q '^portkit.db.new-'"
done

# --- Folder import: what is and is not a trace -------------------------------------------------
mkdir -p "$tmp/folder"
cat >"$tmp/folder/package.json" <<'EOF'
{"name": "my-app", "version": "1.0.0", "license": "MIT", "dependencies": {"left-pad": "^1.3.0"}}
EOF
# A valid trace whose traceEvents comes after byte 256 and after the first 4 KiB (a long first
# member), and a non-trace JSON object longer than 4 KiB.
pad=$(head -c 6000 /dev/zero | tr '\0' 'x')
printf '{"otherData": {"note": "%s"}, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]}\n' "$pad" >"$tmp/folder/late.json"
printf '{"config": {"note": "%s"}, "events": []}\n' "$pad" >"$tmp/folder/big_config.json"
cp "$traces/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz" "$tmp/folder/a.json.gz"
"$PORTKIT" prof import -dir "$tmp/folder" >"$tmp/folder.out" 2>"$tmp/folder.err"
check "folder import exits 0" "[ $? = 0 ]"
check "package.json skipped with a note" "grep -q 'Skipped package.json: not a trace portkit reads' '$tmp/folder.err'"
check "a large non-trace JSON skipped with a note" "grep -q 'Skipped big_config.json: not a trace portkit reads' '$tmp/folder.err'"
check "the trace whose traceEvents starts after 4 KiB is imported" "grep -Eq 'late\.json +\| +kineto +\|' '$tmp/folder.out'"
summary "$tmp/folder/portkit.db" >"$tmp/folder.sum"
check "late.json stored with its event" "grep -qx 'late.json 1 0' '$tmp/folder.sum'"
check "package.json not stored" "! grep -q package '$tmp/folder.sum'"

# --- Deleted and duplicated traces --------------------------------------------------------------
cp "$traces/triton_example__triton_example.json.gz" "$tmp/folder/b.json.gz"
"$PORTKIT" prof import -dir "$tmp/folder" >/dev/null 2>"$tmp/folder.err"
check "b.json.gz imported" "summary '$tmp/folder/portkit.db' | grep >/dev/null '^b.json.gz '"
rm "$tmp/folder/b.json.gz"
"$PORTKIT" prof import -dir "$tmp/folder" >/dev/null 2>"$tmp/folder.err"
check "re-import exits 0 after a trace was deleted" "[ $? = 0 ]"
check "the deleted trace is dropped with a note" "grep -q 'Dropped b.json.gz from the profile' '$tmp/folder.err'"
check "the deleted trace is gone from the store" "! summary '$tmp/folder/portkit.db' | grep >/dev/null '^b.json.gz '"
cp "$tmp/folder/a.json.gz" "$tmp/folder/copy_of_a.json.gz"
"$PORTKIT" prof import -dir "$tmp/folder" >/dev/null 2>"$tmp/folder.err"
check "a copy under another name is warned about" \
  "grep -q 'copy_of_a.json.gz has the same content as a.json.gz' '$tmp/folder.err'"
touch "$tmp/folder/a.json.gz"
"$PORTKIT" prof import -dir "$tmp/folder/a.json.gz" >/dev/null 2>"$tmp/one.err"
check "a one-file import keeps the folder's other traces" \
  "summary '$tmp/folder/portkit.db' | grep >/dev/null '^late.json '"

# --- Out-of-range numbers ------------------------------------------------------------------------
mkdir -p "$tmp/bad"
cat >"$tmp/bad/t.json" <<'EOF'
{"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "good", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"External id": 3}},
 {"ph": "X", "cat": "cpu_op", "name": "negative", "pid": 1, "tid": 1, "ts": 20, "dur": -5},
 {"ph": "X", "cat": "kernel", "name": "huge_id", "pid": 0, "tid": 7, "ts": 30, "dur": 1, "args": {"correlation": 9223372036854775808}},
 {"ph": "X", "cat": "kernel", "name": "huge_tid", "pid": 0, "tid": 18446744073709551615, "ts": 40, "dur": 1},
 {"ph": "X", "cat": "cpu_op", "name": "also_good", "pid": 1, "tid": 1, "ts": 50, "dur": 5}
]}
EOF
"$PORTKIT" prof import -dir "$tmp/bad" >/dev/null 2>"$tmp/bad.err"
check "a trace with out-of-range numbers imports the rest (exit 0)" "[ $? = 0 ]"
check "the left-out events are reported" "grep -q '3 events left out: a timestamp, duration or id out of range' '$tmp/bad.err'"
check "only the valid events are stored" "summary '$tmp/bad/portkit.db' | grep -x 't.json 2 0' >/dev/null"
check "no negative duration stored" \
  "[ \$($py -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT COUNT(*) FROM events WHERE dur < 0 OR tid < -1 OR correlation < -1\").fetchone()[0])' '$tmp/bad/portkit.db') = 0 ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
