#!/usr/bin/env bash
# Hostile SQLite inputs (docs/safety.md, "SQLite inputs"): the profile store portkit.db and the
# tuning bank, edited or made by someone else. Each case is an attack and the policy that stops it:
# views and triggers refused before any row is read or written (no hang on a recursive view),
# strings over the limit never loaded (bounded memory), numbers out of range left out and counted,
# honest messages for a read-only folder and a full disk, and outputs never replaced unless
# portkit wrote them or --force. Every run is under `timeout` (124 means it hung).
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 60"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
trace=tests/data/traces/kineto/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz
bank_json=tests/data/tune/bank_entries.json
sql() { $py -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript(sys.argv[2])
db.commit()' "$@"; }
# Milliseconds a command line took, its exit code in $rc, its output in $2.
timed() {  # out-file, command...
  local out=$1 t0 t1
  shift
  t0=$(date +%s%N)
  "$@" >"$out" 2>&1
  rc=$?
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
}
# Peak RSS (kB) of a command under /usr/bin/time -v; its exit code in $rc.
peak_kb() {  # out-file, command...
  local out=$1
  shift
  /usr/bin/time -v "$@" >"$out" 2>&1
  rc=$?
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$out")
  [ "$rc" != 0 ] || rc=$(sed -n 's/^[[:space:]]*Exit status: //p' "$out")
}
have_time=0
[ -x /usr/bin/time ] && have_time=1

# --- The tuning bank ---------------------------------------------------------------------------
good="$tmp/bank_good"
$T "$PORTKIT" tune bank import "$bank_json" --tune-bank "$good" >"$tmp/bi.out" 2>&1
check "a bank made by bank import (reference)" "[ $? = 0 ] && [ -f '$good/tune_bank.db' ]"
$T "$PORTKIT" tune bank list --tune-bank "$good" >"$tmp/bl.out" 2>&1
check "  lists both entries" "[ $? = 0 ] && grep -q fc1 '$tmp/bl.out' && grep -q conv1 '$tmp/bl.out'"
newbank() { rm -rf "$tmp/$1" && cp -r "$good" "$tmp/$1" && echo "$tmp/$1"; }

# `entries` as a recursive view that never ends (the issue's hang): refused at once.
b=$(newbank bank_view)
sql "$b/tune_bank.db" "ALTER TABLE entries RENAME TO real_entries;
CREATE VIEW entries AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
  SELECT 'k' || i AS op_key, 'v' AS validators, 'MatMul' AS op_type, 'x' AS op_name, 'c' AS config,
         1.0 AS time_us, 2.0 AS default_us, 'u' AS updated, 1 AS measured_here FROM n;"
for sub in "list" "show MatMul" "export $tmp/view_export.json"; do
  timed "$tmp/bv.out" timeout 20 "$PORTKIT" tune bank $sub --tune-bank "$b"
  check "bank $sub on a recursive view: exit 2 in under 5 s (${ms} ms)" "[ $rc = 2 ] && [ $ms -lt 5000 ]"
  check "  says the view is not a bank's table, naming the file" \
    "grep -q \"$b/tune_bank.db: not a tuning bank as portkit writes it: 'entries' is a view where a tuning bank has a table\" '$tmp/bv.out'"
done
check "  bank export wrote nothing" "[ ! -e '$tmp/view_export.json' ]"
timed "$tmp/bvi.out" timeout 20 "$PORTKIT" tune bank import "$bank_json" --tune-bank "$b"
check "bank import into it (a write): exit 2 in under 5 s, refused the same" \
  "[ $rc = 2 ] && [ $ms -lt 5000 ] && grep -q \"'entries' is a view\" '$tmp/bvi.out'"

# A trigger that would rewrite every entry on the tool's own write.
b=$(newbank bank_trigger)
sql "$b/tune_bank.db" "CREATE TRIGGER zap AFTER INSERT ON entries BEGIN UPDATE entries SET config = 'PWNED'; END;
CREATE TRIGGER zap2 AFTER UPDATE ON entries BEGIN UPDATE entries SET op_name = 'PWNED' WHERE op_name != 'PWNED'; END;"
cp "$bank_json" "$tmp/more.json"
sed -i 's/"op_name": "fc1"/"op_name": "fc9"/; s/8.882385964979205/1.5/' "$tmp/more.json"
$T "$PORTKIT" tune bank import "$tmp/more.json" --tune-bank "$b" >"$tmp/bt.out" 2>&1
check "bank import into a bank with a trigger: exit 2, the trigger named" \
  "[ $? = 2 ] && grep -q \"holds a trigger 'zap' on 'entries'\" '$tmp/bt.out'"
check "  the trigger never ran (no PWNED)" \
  "[ \$($py -c \"import sqlite3,sys; print(sum('PWNED' in c + n for c, n in sqlite3.connect(sys.argv[1]).execute('SELECT config, op_name FROM entries')))\" '$b/tune_bank.db') = 0 ]"
$T "$PORTKIT" tune bank list --tune-bank "$b" >"$tmp/btl.out" 2>&1
check "bank list of it: exit 2, refused (not the tool's own schema)" "[ $? = 2 ] && grep -q 'trigger' '$tmp/btl.out'"

# Tables and columns that are not a bank's.
b=$(newbank bank_extra)
sql "$b/tune_bank.db" "ALTER TABLE entries ADD COLUMN payload TEXT;"
$T "$PORTKIT" tune bank list --tune-bank "$b" >"$tmp/bx.out" 2>&1
check "a bank with a column of its own: exit 2, the columns named" \
  "[ $? = 2 ] && grep -q \"table 'entries' has the columns (.*payload)\" '$tmp/bx.out'"
b=$(newbank bank_vtab)
sql "$b/tune_bank.db" "CREATE TABLE notes (x);"
$T "$PORTKIT" tune bank list --tune-bank "$b" >"$tmp/bn.out" 2>&1
check "a bank with a table of its own: exit 2" "[ $? = 2 ] && grep -q \"holds a table 'notes'\" '$tmp/bn.out'"

# A 100 MB config string: never loaded; the entry left out with a message, the others listed.
b=$(newbank bank_big)
$py - "$b/tune_bank.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT op_key, validators, op_type, op_name, config, time_us, default_us, updated, measured_here"
                 " FROM entries WHERE op_name = 'fc1'").fetchone()
db.execute("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?)",
           (row[0] + "|big", row[1], row[2], "big", "x" * (100 << 20), row[5], row[6], row[7], row[8]))
db.commit()
EOF
if [ $have_time = 1 ]; then
  peak_kb "$tmp/bb.out" timeout 60 "$PORTKIT" tune bank list --tune-bank "$b"
  check "bank list with a 100 MB config string: exit 0, peak RSS ${kb} kB < 300 MB" "[ '$rc' = 0 ] && [ '${kb:-999999}' -lt 307200 ]"
  echo "     (bank list, 100 MB string: peak RSS ${kb} kB)"
else
  $T "$PORTKIT" tune bank list --tune-bank "$b" >"$tmp/bb.out" 2>&1
  check "bank list with a 100 MB config string: exit 0" "[ $? = 0 ]"
fi
check "  the entry left out, over the limit, naming the flag" \
  "grep -q 'tune_bank.db: entry 3 left out: over the limit: a string or blob longer than the limit of 1 MiB; not read. --max-string-mb raises the limit' '$tmp/bb.out' && grep -q '1 of 3 entries of' '$tmp/bb.out'"
check "  the other entries listed" "grep -q fc1 '$tmp/bb.out' && grep -q conv1 '$tmp/bb.out'"
$T "$PORTKIT" tune bank export "$tmp/big_export.json" --tune-bank "$b" >"$tmp/bbe.out" 2>&1
check "bank export leaves it out too (2 entries written)" \
  "[ $? = 0 ] && [ \$($py -c \"import json,sys; print(len(json.load(open(sys.argv[1]))['entries']))\" '$tmp/big_export.json') = 2 ]"

# Numbers out of range in the bank: default_us 1e308 (was shown as a 100 % improvement).
b=$(newbank bank_numbers)
sql "$b/tune_bank.db" "UPDATE entries SET default_us = 1e308 WHERE op_name = 'fc1';
UPDATE entries SET time_us = -5 WHERE op_name = 'conv1';"
$T "$PORTKIT" tune bank list --tune-bank "$b" >"$tmp/bnum.out" 2>&1
check "bank list with default_us 1e308 and time_us -5: exit 0, both left out and said why" \
  "[ $? = 0 ] && grep -q 'default_us 1e+308 is out of range' '$tmp/bnum.out' && grep -q 'time_us -5 is out of range' '$tmp/bnum.out' && grep -q '2 of 2 entries' '$tmp/bnum.out'"
check "  no 100 % improvement shown" "! grep -q '100\\.0' '$tmp/bnum.out'"
$py -c "import json,sys; d=json.load(open(sys.argv[1])); d['entries'][1]['default_us']=1e308; json.dump(d, open(sys.argv[2],'w'))" \
  "$bank_json" "$tmp/huge_default.json"
$T "$PORTKIT" tune bank import "$tmp/huge_default.json" --tune-bank "$tmp/bank_fresh" >"$tmp/bhi.out" 2>&1
check "bank import of default_us 1e308: the entry refused, naming why" \
  "[ $? = 0 ] && grep -q 'default_us 1e+308 is out of range' '$tmp/bhi.out'"

# Overwrite policy of bank export: a file it did not write is never replaced without --force.
printf 'import torch\nprint("my training script")\n' >"$tmp/train.py"
cp "$tmp/train.py" "$tmp/train.py.orig"
$T "$PORTKIT" tune bank export "$tmp/train.py" --tune-bank "$good" >"$tmp/bo.out" 2>&1
check "bank export onto a user's train.py: exit 2, not replaced" \
  "[ $? = 2 ] && cmp -s '$tmp/train.py' '$tmp/train.py.orig' && grep -q 'export $tmp/train.py already exists and portkit did not write it; give another name, or --force to replace it' '$tmp/bo.out'"
$T "$PORTKIT" tune bank export "$tmp/train.py" --tune-bank "$good" --force >"$tmp/bo2.out" 2>&1
check "  with --force: replaced (exit 0)" "[ $? = 0 ] && grep -q portkit_tune_bank '$tmp/train.py'"
$T "$PORTKIT" tune bank export "$tmp/train.py" --tune-bank "$good" >"$tmp/bo3.out" 2>&1
check "  an export it wrote is replaced without --force" "[ $? = 0 ]"

# --- The profile store -------------------------------------------------------------------------
p="$tmp/prof"
mkdir -p "$p" && cp "$trace" "$p/"
$T "$PORTKIT" prof import -dir "$p" >"$tmp/pi.out" 2>&1
check "a store made by prof import (reference)" "[ $? = 0 ] && [ -f '$p/portkit.db' ]"
$T "$PORTKIT" prof export summary -dir "$p" -o "$tmp/sum_ref" >"$tmp/ps.out" 2>&1
check "  its summary (reference)" "[ $? = 0 ] && [ -f '$tmp/sum_ref/step_trace.csv' ]"
newstore() { rm -rf "$tmp/$1" && mkdir -p "$tmp/$1" && cp "$p/portkit.db" "$tmp/$1/" && echo "$tmp/$1"; }

s=$(newstore store_view)
sql "$s/portkit.db" "DROP VIEW kernel_launches;
CREATE VIEW kernel_launches AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
  SELECT 1 AS trace, i AS kernel, i AS launch, i AS cpu_op FROM n;"
for cmd in "export summary -o $tmp/sv_sum" "export timeline" "analyse"; do
  timed "$tmp/sv.out" timeout 20 "$PORTKIT" prof $cmd -dir "$s"
  check "prof $cmd on a store with a recursive view: exit 2 in under 5 s (${ms} ms)" "[ $rc = 2 ] && [ $ms -lt 5000 ]"
  check "  says the view is not the store's own, naming the file" \
    "grep -q \"$s/portkit.db: not a profile store as portkit writes it: the view 'kernel_launches' is not a profile store's own\" '$tmp/sv.out'"
done
timed "$tmp/svd.out" timeout 20 "$PORTKIT" prof diff "$p" "$s" -o "$tmp/sv_diff"
check "prof diff with it: exit 2 in under 5 s" "[ $rc = 2 ] && [ $ms -lt 5000 ] && grep -q 'kernel_launches' '$tmp/svd.out'"

s=$(newstore store_trigger)
cp "$trace" "$s/"
sql "$s/portkit.db" "CREATE TRIGGER spy AFTER INSERT ON events BEGIN UPDATE traces SET path = 'PWNED'; END;"
$T "$PORTKIT" prof import -dir "$s" >"$tmp/st.out" 2>&1
check "prof import into a store with a trigger: exit 2, the trigger named" \
  "[ $? = 2 ] && grep -q \"holds a trigger 'spy' on 'events'\" '$tmp/st.out'"
check "  the trigger never ran" "! $py -c \"import sqlite3,sys; sys.exit(0 if any('PWNED' in p for (p,) in sqlite3.connect(sys.argv[1]).execute('SELECT path FROM traces')) else 1)\" '$s/portkit.db'"
$T "$PORTKIT" prof export summary -dir "$s" -o "$tmp/st_sum" >"$tmp/st2.out" 2>&1
check "prof export summary of it: exit 2" "[ $? = 2 ] && grep -q 'trigger' '$tmp/st2.out'"

s=$(newstore store_column)
sql "$s/portkit.db" "ALTER TABLE events ADD COLUMN evil TEXT;"
$T "$PORTKIT" prof analyse -dir "$s" >"$tmp/sc.out" 2>&1
check "a store with a column of its own: exit 2, the table named" \
  "[ $? = 2 ] && grep -q \"table 'events' has the columns\" '$tmp/sc.out'"

# Numbers out of range (the issue: an iteration start of -9.2e15 us, a 292-year step, negative
# timeline timestamps, exit 0): left out, counted, and said.
s=$(newstore store_numbers)
sql "$s/portkit.db" "UPDATE events SET ts = -9200000000000000000 WHERE rowid = (SELECT min(rowid) FROM events WHERE kind = 'step');
UPDATE events SET dur = 9200000000000000000 WHERE rowid = (SELECT max(rowid) FROM events WHERE kind = 'cpu_op');
UPDATE events SET ts = 'soon' WHERE rowid = (SELECT min(rowid) FROM events WHERE kind = 'kernel');
UPDATE marks SET ts = -9000000000000000000 WHERE rowid = (SELECT min(rowid) FROM marks WHERE ts IS NOT NULL);"
$T "$PORTKIT" prof export summary -dir "$s" -o "$tmp/sn_sum" >"$tmp/sn.out" 2>&1
check "export summary of a store with out-of-range rows: exit 0, 3 events and 1 mark left out, said why" \
  "[ $? = 0 ] && grep -q 'portkit.db: 3 events and 1 marks left out: a timestamp or duration out of range' '$tmp/sn.out'"
bigvals() {  # the largest absolute number in a CSV folder's step_trace.csv
  $py -c "import csv,sys
m = 0
for row in list(csv.reader(open(sys.argv[1])))[1:]:
    for c in row[1:]:
        try: m = max(m, abs(float(c)))
        except ValueError: pass
print(int(m))" "$1/step_trace.csv"
}
check "  no iteration start or step time beyond the unedited store's ($(bigvals "$tmp/sn_sum") <= $(bigvals "$tmp/sum_ref") us)" \
  "[ \$(bigvals '$tmp/sn_sum') -le \$(bigvals '$tmp/sum_ref') ] && [ \$(wc -l <'$tmp/sn_sum/step_trace.csv') = 2 ]"
$T "$PORTKIT" prof export timeline -dir "$s" -o "$tmp/sn_timeline.json" >"$tmp/snt.out" 2>&1
check "export timeline of it: exit 0, the rows left out said" "[ $? = 0 ] && grep -q 'left out' '$tmp/snt.out'"
check "  no negative timestamp in the timeline" \
  "$py -c \"import json,sys; e=json.load(open(sys.argv[1]))['traceEvents']; sys.exit(0 if min(x.get('ts', 0) for x in e) >= 0 else 1)\" '$tmp/sn_timeline.json'"
$T "$PORTKIT" prof analyse -dir "$s" -o "$tmp/sn_an" >"$tmp/sna.out" 2>&1
check "analyse of it: exit 0, the rows left out said" "[ $? = 0 ] && grep -q 'left out' '$tmp/sna.out'"
$T "$PORTKIT" prof diff "$p" "$s" -o "$tmp/sn_diff" >"$tmp/snd.out" 2>&1
check "diff with it: exit 0, the rows left out said" "[ $? = 0 ] && grep -q 'left out' '$tmp/snd.out'"
# tune --model reads operator shapes from a store through the same bounds: the rows it leaves out
# are counted and said, on stderr and in tune_report.json, never dropped silently.
tp="$tmp/tune_prof"
mkdir -p "$tp"
cat >"$tp/trace.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
  "args": {"Input Dims": [[10, 4], [4, 32]], "Input type": ["float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
  "args": {"Input Dims": [[6, 8], [8, 3]], "Input type": ["float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 30, "dur": 5,
  "args": {"Input Dims": [[10], [4, 32], [32, 10], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}}
]}
JSON
$T "$PORTKIT" prof import -dir "$tp" >/dev/null 2>&1
sql "$tp/portkit.db" "UPDATE events SET dur = 9200000000000000000 WHERE rowid = (SELECT e.rowid FROM events e JOIN strings s ON s.id = e.name WHERE s.value = 'aten::addmm');
UPDATE events SET ts = 'soon' WHERE rowid = (SELECT max(e.rowid) FROM events e JOIN strings s ON s.id = e.name WHERE s.value = 'aten::mm');"
$T "$PORTKIT" tune --model "$tp" --tune-bank "$good" --lookup-only --output "$tmp/tune_prof_out" \
  --format json >"$tmp/tpo.out" 2>"$tmp/tpo.err"
check "tune --model of a store with 2 out-of-range rows: exit 0, says on stderr how many and why" \
  "[ $? = 0 ] && grep -q 'tune_prof/portkit.db: 2 events left out: a timestamp or duration out of range' '$tmp/tpo.err'"
check "  tune_report.json lists them in input_left_out; the one row in range is the only operator" \
  "$py -c \"import json, sys
r = json.load(open(sys.argv[1]))
notes = r['input_left_out']
ops = [o['op_name'] for o in r['operators']] + [u['op_name'] for u in r['untuned']]
sys.exit(0 if len(notes) == 1 and '2 events left out' in notes[0] and ops == ['mm_0'] else 1)\" '$tmp/tune_prof_out/tune_report.json'"

# A 100 MB string in the store: never loaded; the reading command ends "over the limit".
s=$(newstore store_big)
$py - "$s/portkit.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(sid,) = db.execute("SELECT name FROM events WHERE kind = 'cpu_op' LIMIT 1").fetchone()
db.execute("UPDATE strings SET value = ? WHERE id = ?", ("n" * (100 << 20), sid))
db.commit()
EOF
if [ $have_time = 1 ]; then
  peak_kb "$tmp/sb.out" timeout 60 "$PORTKIT" prof export summary -dir "$s" -o "$tmp/sb_sum"
  check "export summary with a 100 MB name: exit 2, peak RSS ${kb} kB < 300 MB" "[ '$rc' = 2 ] && [ '${kb:-999999}' -lt 307200 ]"
  echo "     (prof export summary, 100 MB string: peak RSS ${kb} kB)"
else
  $T "$PORTKIT" prof export summary -dir "$s" -o "$tmp/sb_sum" >"$tmp/sb.out" 2>&1
  check "export summary with a 100 MB name: exit 2" "[ $? = 2 ]"
fi
check "  over the limit, naming the file and the flag" \
  "grep -q \"$s/portkit.db: .*over the limit: a string or blob longer than the limit of 64 MiB; not read. --max-string-mb raises the limit\" '$tmp/sb.out'"

# Overwrite policy of export timeline -o.
cp "$tmp/train.py.orig" "$tmp/train2.py"
$T "$PORTKIT" prof export timeline -dir "$p" -o "$tmp/train2.py" >"$tmp/to.out" 2>&1
check "export timeline -o onto a user's train.py: exit 2, not replaced" \
  "[ $? = 2 ] && cmp -s '$tmp/train2.py' '$tmp/train.py.orig' && grep -q -- '--output $tmp/train2.py already exists and portkit did not write it; give another name, or --force to replace it' '$tmp/to.out'"
$T "$PORTKIT" prof export timeline -dir "$p" -o "$tmp/train2.py" --force >"$tmp/to2.out" 2>&1
check "  with --force: replaced" "[ $? = 0 ] && grep -q displayTimeUnit '$tmp/train2.py'"
$T "$PORTKIT" prof export timeline -dir "$p" -o "$tmp/train2.py" >"$tmp/to3.out" 2>&1
check "  a timeline it wrote is replaced without --force" "[ $? = 0 ]"
$T "$PORTKIT" prof export timeline -dir "$p" >"$tmp/to4.out" 2>&1
$T "$PORTKIT" prof export timeline -dir "$p" >"$tmp/to5.out" 2>&1
check "  the default timeline/timeline.json is replaced on the next export" "[ $? = 0 ]"

# Reading commands never write the store.
sum_before=$(md5sum <"$p/portkit.db")
$T "$PORTKIT" prof analyse -dir "$p" -o "$tmp/an_ro" >/dev/null 2>&1
check "prof analyse leaves portkit.db byte for byte as it was" "[ \"\$(md5sum <'$p/portkit.db')\" = '$sum_before' ]"

# A read-only folder and a full disk (a tmpfs in a mount namespace of our own; skipped where
# there is none).
if unshare -m true 2>/dev/null; then
  mnt="$tmp/mnt"
  mkdir -p "$mnt"
  unshare -m bash -c "
    mount -t tmpfs -o size=8m portkit-ro '$mnt' || exit 77
    mkdir -p '$mnt/p' && cp '$trace' '$mnt/p/' && '$PORTKIT' prof import -dir '$mnt/p' >/dev/null 2>&1 || exit 78
    mount -o remount,ro '$mnt' || exit 77
    timeout 60 '$PORTKIT' prof export summary -dir '$mnt/p' -o '$tmp/ro_sum' >'$tmp/ro1.out' 2>&1; echo \$? >'$tmp/ro1.rc'
    timeout 60 '$PORTKIT' prof import -dir '$mnt/p' >'$tmp/ro2.out' 2>&1; echo \$? >'$tmp/ro2.rc'
  "
  nsrc=$?
  if [ $nsrc = 77 ]; then
    echo "skip read-only folder (no tmpfs mount here)"
  else
    check "export summary of a store in a read-only folder: exit 0 (read as an immutable file)" \
      "[ \"\$(cat '$tmp/ro1.rc')\" = 0 ] && [ -f '$tmp/ro_sum/step_trace.csv' ]"
    check "import into a read-only folder: exit 2, says it cannot be written, not 'damaged'" \
      "[ \"\$(cat '$tmp/ro2.rc')\" = 2 ] && grep -q 'portkit.db: cannot be written: the file system of .* is read-only' '$tmp/ro2.out' && ! grep -q 'damaged' '$tmp/ro2.out'"
  fi
  big=tests/data/traces/kineto/trace_diff__control__control.json.gz
  unshare -m bash -c "
    mount -t tmpfs -o size=2m portkit-full '$mnt' || exit 77
    mkdir -p '$mnt/p' && cp '$big' '$mnt/p/'
    timeout 120 '$PORTKIT' prof import -dir '$mnt/p' >'$tmp/full.out' 2>&1; echo \$? >'$tmp/full.rc'
  "
  if [ $? = 77 ]; then
    echo "skip full disk (no tmpfs mount here)"
  else
    check "import onto a full disk: exit 2, says the disk is full, not 'damaged'" \
      "[ \"\$(cat '$tmp/full.rc')\" = 2 ] && grep -q 'the disk is full' '$tmp/full.out' && ! grep -q 'damaged' '$tmp/full.out'"
  fi
else
  echo "skip read-only folder and full disk (no mount namespace here)"
fi

echo "store_hostile: $pass passed, $fail failed"
[ "$fail" = 0 ]
