#!/usr/bin/env bash
# `portkit tune` end to end on tests/data/tune/small_model.json with a few real compiles (a
# pinned space and two evaluations per operator), then bank semantics across runs, replay of the
# recorded landscape with every strategy, the bank subcommands, and bad input.
source "$(dirname "$0")/harness.sh"
model=tests/data/tune/small_model.json
bank="$tmp/bank"
pin=(--fix MC=48 --fix NC=768 --fix KC=128 --fix MR=4,6 --fix NR=16 --fix VW=16 --fix PACK_A=1 --fix ORDER=0 --fix UNROLL=1,4 --fix THREADS=1)
result() { ls "$1"/aoe_result_opat_*_pid*.json 2>/dev/null | head -1; }
num() {  # result file, repo_summary field
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['OPAT']['repo_summary'][sys.argv[2]])" "$1" "$2"
}

"$PORTKIT" tune --job-type=2 --model="$model" --tune-bank "$bank" --output "$tmp/r1" --max-evals 2 --repeats 5 "${pin[@]}" \
  >"$tmp/o1" 2>"$tmp/e1"; rc=$?
r1=$(result "$tmp/r1")
check "first run tunes and writes the result file" "[ $rc = 0 ] && [ -n '$r1' ] && [ -f '$tmp/r1/tuned_plan.json' ]"
check "first run: every operator added or unsatisfied" "[ \$(( \$(num '$r1' repo_add_num) + \$(num '$r1' repo_unsatisfied_num) )) = 2 ] && [ \$(num '$r1' total_num) = 2 ]"
check "console: Aoe process finished with the improvement" "grep -q 'Aoe process finished, model performance .* improvement -\\?[0-9.]*%' '$tmp/e1'"
check "unknown operator types are listed untuned" "grep -q 'act (Relu) is not tuned' '$tmp/e1' && grep -q '\"reason\"' '$r1'"
check "the landscape records the measurements" "[ \$(grep -c '\"kind\": \"eval\"' '$tmp/r1/tune_landscape.jsonl') -ge 4 ]"
check "bank and kernel cache written" "[ -f '$bank/tune_bank.db' ] && ls '$bank'/kernels/*.so >/dev/null"

"$PORTKIT" tune --job-type=2 --model="$model" --tune-bank "$bank" --output "$tmp/r2" "${pin[@]}" >"$tmp/o2" 2>"$tmp/e2"; rc=$?
r2=$(result "$tmp/r2")
check "second run: added operators are hits" "[ $rc = 0 ] && [ \$(num '$r2' repo_hit_num) = \$(num '$r1' repo_add_num) ]"

stored=$(/usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM entries').fetchone()[0])" "$bank/tune_bank.db")
REPEAT_TUNE=True "$PORTKIT" tune --job_type=2 --model="$model" --tune-bank "$bank" --output "$tmp/r3" --max-evals 2 --repeats 5 "${pin[@]}" \
  >"$tmp/o3" 2>"$tmp/e3"; rc=$?
r3=$(result "$tmp/r3")
# Seed 004's counting: every operator found in the bank is a hit; re-tuned, each ends as update or
# reserved, so hit = update + reserved; total = add + hit + unsatisfied.
check "REPEAT_TUNE=True re-tunes: hits = stored entries = update + reserved; total = add + hit + unsatisfied" \
  "[ $rc = 0 ] && [ \$(num '$r3' repo_hit_num) = $stored ] && [ \$(( \$(num '$r3' repo_update_num) + \$(num '$r3' repo_reserved_num) )) = \$(num '$r3' repo_hit_num) ] && [ \$(num '$r3' total_num) = 2 ] && [ \$(( \$(num '$r3' repo_add_num) + \$(num '$r3' repo_hit_num) + \$(num '$r3' repo_unsatisfied_num) )) = 2 ]"

# Landscapes are kept: a second run into the same output folder appends to the landscape (same
# machine, toolchain and --fix), and the file replays as the union.
n1=$(grep -c '"kind": "eval"' "$tmp/r1/tune_landscape.jsonl")
cp "$tmp/r1/tune_landscape.jsonl" "$tmp/landscape_r1.jsonl"
REPEAT_TUNE=True "$PORTKIT" tune --model="$model" --tune-bank "$tmp/bank_again" --output "$tmp/r1" --max-evals 2 --repeats 5 --seed 7 "${pin[@]}" \
  >/dev/null 2>"$tmp/e1b"; rc=$?
kept=$(/usr/bin/python3 - "$tmp/landscape_r1.jsonl" "$tmp/r1/tune_landscape.jsonl" <<'PY'
import json, sys
def evals(f):
    return {(l["signature"], l["config"]) for l in map(json.loads, open(f)) if l["kind"] == "eval"}
old, new = evals(sys.argv[1]), evals(sys.argv[2])
print("ok" if old <= new and len(new) >= len(old) else "lost %d" % len(old - new))
PY
)
check "a second run into the same folder keeps the earlier landscape (appended, union)" "[ $rc = 0 ] && [ '$kept' = ok ] && [ $n1 -ge 4 ]"
printf '{"kind": "landscape", "version": 1, "validators": "cpu=elsewhere;cores=2", "fix": []}\n' >"$tmp/other.jsonl"
"$PORTKIT" tune --model="$model" --tune-bank "$tmp/bank_again" --record "$tmp/other.jsonl" --output "$tmp/r1c" --max-evals 1 --repeats 5 \
  --repeat-tune "${pin[@]}" >/dev/null 2>&1; rc=$?
check "a landscape of another machine is kept; the run records into a numbered file beside it" \
  "[ $rc = 0 ] && [ \$(wc -l <'$tmp/other.jsonl') = 1 ] && grep -q '\"kind\": \"eval\"' '$tmp/other.1.jsonl'"

for s in exhaustive random annealing genetic bandit guided; do
  "$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --strategy $s --tune-bank "$tmp/bank_$s" --output "$tmp/replay_$s" \
    --max-evals 3 >"$tmp/rp_$s" 2>&1; rc=$?
  check "replay with $s" "[ $rc = 0 ] && [ -n \"\$(ls '$tmp/replay_$s'/aoe_result_opat_*.json)\" ] && [ ! -e '$tmp/replay_$s/tune_landscape.jsonl' ]"
done

# The bank sub-commands on a bank filled by a replay of the recorded landscape (deterministic: both
# operators added; a measuring run on this noisy machine may find nothing significantly better).
eb="$tmp/bank_replay"
"$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl --strategy exhaustive --max-evals 1000 --tune-bank "$eb" \
  --output "$tmp/replay_eb" >/dev/null 2>&1
"$PORTKIT" tune bank --list --tune-bank "$eb" >"$tmp/bl" 2>&1; rc=$?
check "bank --list" "[ $rc = 0 ] && grep -q 'entries in $eb/tune_bank.db' '$tmp/bl'"
"$PORTKIT" tune bank --show fc1 --tune-bank "$eb" >"$tmp/bs" 2>&1; rc=$?
check "bank --show" "[ $rc = 0 ] && grep -q '^strategy: *MC=' '$tmp/bs'"
"$PORTKIT" tune bank --export "$tmp/bank.json" --tune-bank "$eb" >/dev/null 2>&1 &&
  "$PORTKIT" tune bank --import "$tmp/bank.json" --tune-bank "$tmp/bank2" >"$tmp/bi" 2>&1; rc=$?
entries=$(/usr/bin/python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['entries']))" "$tmp/bank.json")
check "bank --export then --import into a new bank" "[ $rc = 0 ] && [ $entries -ge 1 ] && grep -q '$entries added, 0 updated' '$tmp/bi'"
"$PORTKIT" tune bank --show nosuchop --tune-bank "$eb" >"$tmp/bn" 2>&1; rc=$?
check "bank --show of an unknown operator exits 2" "[ $rc = 2 ] && grep -q \"no entry for 'nosuchop'\" '$tmp/bn'"
# The sub-command spellings: list (also as JSON), show, export, import.
"$PORTKIT" tune bank list --tune-bank "$eb" --format json >"$tmp/blj" 2>/dev/null; rc=$?
check "bank list --format json loads with python3 and holds the entries" \
  "[ $rc = 0 ] && [ \$(/usr/bin/python3 -c \"import json,sys; print(len(json.load(open(sys.argv[1]))['entries']))\" '$tmp/blj') = $entries ]"
"$PORTKIT" tune bank export "$tmp/bank_sub.json" --tune-bank "$eb" >/dev/null 2>&1 &&
  "$PORTKIT" tune bank import "$tmp/bank_sub.json" --tune-bank "$tmp/bank_sub" >"$tmp/bis" 2>&1; rc=$?
check "bank export / bank import sub-commands" "[ $rc = 0 ] && grep -q '$entries added, 0 updated' '$tmp/bis'"
"$PORTKIT" tune bank list --tune-bank "$tmp/no_bank_here" >"$tmp/bm" 2>&1; rc=$?
check "bank list of a missing bank exits 2 and creates nothing" "[ $rc = 2 ] && grep -q 'no tuning bank at' '$tmp/bm' && [ ! -e '$tmp/no_bank_here' ]"
# Listing opens the bank read-only: a read-only bank lists (when not run as root, the mode is
# enforced), and the file is left byte for byte as it was.
sum_before=$(md5sum <"$tmp/bank_sub/tune_bank.db")
chmod a-w "$tmp/bank_sub" "$tmp/bank_sub/tune_bank.db"
"$PORTKIT" tune bank list --tune-bank "$tmp/bank_sub" >"$tmp/bro" 2>&1; rc=$?
chmod u+w "$tmp/bank_sub" "$tmp/bank_sub/tune_bank.db"
check "bank list reads a read-only bank and leaves it unchanged" \
  "[ $rc = 0 ] && grep -q '$entries entries in' '$tmp/bro' && [ \"\$(md5sum <'$tmp/bank_sub/tune_bank.db')\" = '$sum_before' ]"
# A bank written before schema versions (same table, no user_version) lists as it is, then is
# migrated by the next tune; a bank of a newer schema is refused with what to do.
/usr/bin/python3 - "$tmp/old_bank/tune_bank.db" <<'PY'
import os, sqlite3, sys
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE entries (op_key TEXT NOT NULL, validators TEXT NOT NULL, op_type TEXT NOT NULL, op_name TEXT NOT NULL, config TEXT NOT NULL, time_us REAL NOT NULL, default_us REAL NOT NULL, updated TEXT NOT NULL, PRIMARY KEY (op_key, validators))")
db.execute("INSERT INTO entries VALUES ('MatMul|x', 'cpu=x;portkit=0.0.1', 'MatMul', 'fc', 'A=1', 5, 10, '2026-01-01T00:00:00Z')")
db.commit()
PY
"$PORTKIT" tune bank list --tune-bank "$tmp/old_bank" >"$tmp/ob1" 2>&1; rc1=$?
"$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl --max-evals 2 --tune-bank "$tmp/old_bank" --output "$tmp/ob" >/dev/null 2>"$tmp/ob2"; rc2=$?
version() { /usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA user_version').fetchone()[0])" "$1"; }
check "an unversioned bank lists, then a tune migrates it (schema 2) keeping its entries" \
  "[ $rc1 = 0 ] && grep -q 'written before schema versions' '$tmp/ob1' && [ $rc2 = 0 ] && [ \$(version '$tmp/old_bank/tune_bank.db') = 2 ] && \"$PORTKIT\" tune bank show fc --tune-bank '$tmp/old_bank' 2>/dev/null | grep -q '^validators: cpu=x;portkit=0.0.1$'"
/usr/bin/python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute('PRAGMA user_version = 7'); db.commit()" "$tmp/old_bank/tune_bank.db"
"$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl --tune-bank "$tmp/old_bank" --output "$tmp/ob" >/dev/null 2>"$tmp/ob3"; rc=$?
check "a bank of a newer schema is refused with what to do" \
  "[ $rc = 2 ] && grep -q 'tuning bank schema 7 is newer than this portkit reads (2); use a newer portkit' '$tmp/ob3'"

# Bad input: clear messages, non-zero exits, no crash.
printf '{"ops": [{"op_type": "MatMul", "inputs": [[2, 3], [4, 5]]}]}' >"$tmp/bad.json"
"$PORTKIT" tune --model "$tmp/bad.json" --tune-bank "$bank" >"$tmp/x1" 2>&1; rc=$?
check "malformed op list names file and field" "[ $rc = 2 ] && grep -q '$tmp/bad.json: ops\\[0\\].inputs: MatMul inner dimensions differ' '$tmp/x1'"
"$PORTKIT" tune --model "$tmp/missing.json" --tune-bank "$bank" >"$tmp/x2" 2>&1; rc=$?
check "missing model file exits 2" "[ $rc = 2 ] && grep -q 'missing.json' '$tmp/x2'"
"$PORTKIT" tune --tune-bank "$bank" >"$tmp/x3" 2>&1; rc=$?
check "no --model exits 2" "[ $rc = 2 ] && grep -q 'give --model FILE' '$tmp/x3'"
"$PORTKIT" tune --job-type=1 --model "$model" >"$tmp/x4" 2>&1; rc=$?
check "job type 1 without --framework says what is missing" "[ $rc = 2 ] && grep -q 'give --framework=pytorch' '$tmp/x4'"
"$PORTKIT" tune --model "$model" --strategy hill --tune-bank "$tmp/bank_x" --output "$tmp/x" >"$tmp/x5" 2>&1; rc=$?
check "unknown strategy exits 2, creating no bank" "[ $rc = 2 ] && grep -q 'unknown strategy (strategies: exhaustive' '$tmp/x5' && [ ! -e '$tmp/bank_x' ]"
"$PORTKIT" tune --model "$tmp/missing.json" --strategy nope --tune-bank "$tmp/bank_x" --output "$tmp/x" >"$tmp/x5b" 2>&1; rc=$?
check "the strategy is refused before the op list is read" "[ $rc = 2 ] && grep -q 'unknown strategy' '$tmp/x5b' && ! grep -q 'missing.json' '$tmp/x5b' && [ ! -e '$tmp/bank_x' ] && [ ! -e '$tmp/x' ]"
for j in 0 -3; do
  "$PORTKIT" tune --model "$model" -j $j --tune-bank "$tmp/bank_x" --output "$tmp/x" >"$tmp/xj" 2>&1; rc=$?
  check "-j $j exits 2 before any work" "[ $rc = 2 ] && grep -q 'jobs' '$tmp/xj' && [ ! -e '$tmp/bank_x' ]"
done
TE_PARALLEL_COMPILER=lots "$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_x" >"$tmp/x6" 2>&1; rc=$?
check "bad TE_PARALLEL_COMPILER exits 2" "[ $rc = 2 ] && grep -q 'TE_PARALLEL_COMPILER=lots' '$tmp/x6'"
printf '{"kind": "eval"}\n' >"$tmp/bad.jsonl"
"$PORTKIT" tune --replay "$tmp/bad.jsonl" --tune-bank "$tmp/bank_x" >"$tmp/x7" 2>&1; rc=$?
check "malformed landscape names file and line" "[ $rc = 2 ] && grep -q '$tmp/bad.jsonl:1: signature: missing' '$tmp/x7'"
"$PORTKIT" tune --help >"$tmp/h" 2>&1; rc=$?
check "--help renders every strategy's options" "[ $rc = 0 ] && grep -q 'cooling=0.93' '$tmp/h' && grep -q 'population=8' '$tmp/h' && grep -q 'TUNE_BANK_PATH' '$tmp/h'"
check "--help lists bank and its sub-commands" "grep -q 'bank list' '$tmp/h' && grep -q 'bank show OP' '$tmp/h' && grep -q 'bank export FILE' '$tmp/h' && grep -q 'bank import FILE' '$tmp/h' && ! grep -qi 'seed 00' '$tmp/h'"
"$PORTKIT" --help >"$tmp/h0" 2>&1
check "portkit --help lists tune bank's sub-commands" "grep -q 'tune bank list | show OP | export FILE | import FILE' '$tmp/h0'"
# --format json: the whole report, readable by json.load, with the accounting and the files written.
"$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl --tune-bank "$tmp/bank_json" --output "$tmp/json" --max-evals 3 \
  --format json >"$tmp/json.out" 2>/dev/null; rc=$?
jsonok=$(/usr/bin/python3 - "$tmp/json/tune_report.json" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
a = r["accounting"]
ok = (r["portkit_tune_report"] == 1 and a["add"] + a["unsatisfied"] == 2 and a["total"] == 2 and len(r["operators"]) == 2
      and all(os.path.exists(f) for f in r["files_written"]) and any(f.endswith("tuned_plan.json") for f in r["files_written"])
      and r["replay"] is True and "template=" not in r["bank"]["validators"])
print("ok" if ok else r)
PY
)
check "--format json writes tune_report.json (json.load) and no table" "[ $rc = 0 ] && [ '$jsonok' = ok ] && [ ! -s '$tmp/json.out' ]"

# A profile with recorded shapes (Kineto's "Input Dims"; torch 1.13's legacy profiler records none):
# aten::addmm and aten::mm become MatMul, aten::conv2d is listed untuned.
mkdir -p "$tmp/prof"
cat >"$tmp/prof/trace.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
  "args": {"Input Dims": [[10], [4, 32], [32, 10], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
  "args": {"Input Dims": [[10], [4, 32], [32, 10], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 30, "dur": 5,
  "args": {"Input Dims": [[10, 4], [4, 32]], "Input type": ["float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 40, "dur": 5,
  "args": {"Input Dims": [[4, 3, 8, 8], [32, 3, 1, 1], [32], [], [], [], []], "Input type": ["float", "float", "float", "", "", "", ""]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 50, "dur": 10,
  "args": {"Input Dims": [[2, 5, 24], [12, 24], [12]], "Input type": ["float", "float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 52, "dur": 5,
  "args": {"Input Dims": [[12], [10, 24], [24, 12], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "pid": 1, "tid": 1, "ts": 70, "dur": 5,
  "args": {"Input Dims": [[6, 8], [8, 3]], "Input type": ["float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 80, "dur": 5,
  "args": {"Input Dims": [[2000000, 4], [4, 4]], "Input type": ["float", "float"]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 90, "dur": 5,
  "args": {"Input Dims": [[3, 5], [6, 2]], "Input type": ["float", "float"]}}
]}
JSON
"$PORTKIT" prof import -dir "$tmp/prof" >/dev/null 2>&1
"$PORTKIT" tune --model "$tmp/prof" --tune-bank "$bank" --output "$tmp/rp" --max-evals 1 --repeats 5 "${pin[@]}" >"$tmp/op" 2>"$tmp/ep"; rc=$?
check "a profile folder: addmm and mm tuned, conv2d untuned" \
  "[ $rc = 0 ] && grep -q 'MatMul|float32|ND|\[4,32\],\[32,10\]|bias=1' '$tmp/rp/tuned_plan.json' && grep -q 'MatMul|float32|ND|\[10,4\],\[4,32\]|bias=0' '$tmp/rp/tuned_plan.json' && grep -q 'do not record the stride and padding' '$tmp/rp/tuned_plan.json'"
# aten::linear (3-D input flattened) and 2-D aten::matmul become MatMul; the addmm nested in the
# linear is the same work and is not listed again; profile ops get the op list's checks (a
# dimension over 2^20, inner dimensions that differ: untuned, not tuned and not fatal).
rpres=$(result "$tmp/rp")
names() {  # every operator of a result file, tuned or not, sorted
  /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['OPAT']; print(' '.join(sorted(o['op_name'] for o in r['operators'] + r['untuned_operators'])))" "$1"
}
check "a profile folder: aten::linear and aten::matmul tuned, nested addmm skipped" \
  "grep -q 'MatMul|float32|ND|\[10,24\],\[24,12\]|bias=1' '$tmp/rp/tuned_plan.json' && grep -q 'MatMul|float32|ND|\[6,8\],\[8,3\]|bias=0' '$tmp/rp/tuned_plan.json' && [ \"\$(names '$rpres')\" = 'addmm_0 conv2d_2 linear_3 matmul_4 mm_1 mm_5 mm_6' ]"
check "a profile folder: oversized and mismatched ops are validated and listed untuned" \
  "grep -q 'aten::mm.inputs\[0\]: dimensions must be between 1 and 1048576 (input dims \[\[2000000, 4\], \[4, 4\]\])' '$rpres' && grep -q 'MatMul inner dimensions differ' '$rpres'"
"$PORTKIT" tune --model "$tmp" --tune-bank "$bank" >"$tmp/x8" 2>&1; rc=$?
check "a folder without portkit.db exits 2" "[ $rc = 2 ] && grep -q 'no portkit.db; run .portkit prof import' '$tmp/x8'"

# Two tuners on one bank at once, started together on real compiles (each takes seconds, checked
# below, so they overlap; the interleaving of individual bank writes is exercised deterministically
# by knowledge_base_test's TwoConcurrentWritersNeverCorruptIt): both succeed, the bank stays
# intact, and it holds what one of them stored.
shared="$tmp/shared_bank"
"$PORTKIT" tune --model "$model" --strategy random --tune-bank "$shared" --output "$tmp/c1" --max-evals 2 --repeats 5 \
  --parallel-compile 1 "${pin[@]}" >/dev/null 2>"$tmp/c1.err" &
p1=$!
"$PORTKIT" tune --model "$model" --strategy genetic --tune-bank "$shared" --output "$tmp/c2" --max-evals 2 --repeats 5 \
  --parallel-compile 1 "${pin[@]}" >/dev/null 2>"$tmp/c2.err" &
p2=$!
wait $p1; rc1=$?
wait $p2; rc2=$?
integrity() { /usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])" "$1"; }
ok1=$(integrity "$shared/tune_bank.db")
grep -h ERROR "$tmp/c1.err" "$tmp/c2.err"
check "two concurrent tuners on one bank: both succeed, bank intact" "[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ '$ok1' = ok ]"
c1=$(result "$tmp/c1"); c2=$(result "$tmp/c2")
landed=$(/usr/bin/python3 - "$shared/tune_bank.db" "$c1" "$c2" <<'PY'
import json, sqlite3, sys
bank = {name: cfg for name, cfg in sqlite3.connect(sys.argv[1]).execute("SELECT op_name, config FROM entries")}
bad, stored = [], {}
for f in sys.argv[2:]:
    r = json.load(open(f))
    if r["basic"]["tuning_time(s)"] < 0.5:
        bad.append("%s: too short to overlap the other run" % f)
    for op in r["OPAT"]["operators"]:
        if op["repo_status"] in ("add", "reserved"):
            stored.setdefault(op["op_name"], []).append(op["strategy"])
        # Reserved: the other tuner stored a faster entry first; what is reported is that entry,
        # which stays (each tuner stores an operator once). An add may be replaced by the other.
        if op["repo_status"] == "reserved" and bank.get(op["op_name"]) != op["strategy"]:
            bad.append("%s %s: reports %s, bank holds %s" % (f, op["op_name"], op["strategy"], bank.get(op["op_name"])))
for name, cfgs in stored.items():
    if bank.get(name) not in cfgs:
        bad.append("%s: bank holds %s, reported %s" % (name, bank.get(name), cfgs))
print("\n".join(bad) if bad else "ok")
PY
)
[ "$landed" = ok ] || echo "$landed"
check "two concurrent tuners: both results landed and match the bank" "[ -n '$c1' ] && [ -n '$c2' ] && [ '$landed' = ok ]"

# A tuner killed with SIGKILL mid-run, after it has written to the bank (its -wal file exists) and
# measured candidates: the bank stays intact and usable, and the landscape keeps what it measured.
cat >"$tmp/many.json" <<'JSON'
{"name": "many", "ops": [
  {"op_name": "m1", "op_type": "MatMul", "inputs": [[64, 128], [128, 96]]},
  {"op_name": "m2", "op_type": "MatMul", "inputs": [[32, 64], [64, 48]]},
  {"op_name": "m3", "op_type": "MatMul", "inputs": [[48, 32], [32, 64]]},
  {"op_name": "m4", "op_type": "MatMul", "inputs": [[16, 96], [96, 32]]},
  {"op_name": "m5", "op_type": "MatMul", "inputs": [[80, 16], [16, 16]]}
]}
JSON
"$PORTKIT" tune --model "$tmp/many.json" --tune-bank "$tmp/killed_bank" --output "$tmp/k" --max-evals 50 --patience 0 --strategy exhaustive \
  --parallel-compile 1 --fix MC=48,96 --fix NC=768 --fix KC=128 --fix VW=16 --fix PACK_A=1 --fix ORDER=0 --fix THREADS=1 >/dev/null 2>"$tmp/k.err" &
pk=$!
evals() { local n; n=$(grep -c '"kind": "eval"' "$tmp/k/tune_landscape.jsonl" 2>/dev/null); echo "${n:-0}"; }
for _ in $(seq 1 600); do
  [ -e "$tmp/killed_bank/tune_bank.db-wal" ] && [ "$(evals)" -ge 2 ] && break
  kill -0 $pk 2>/dev/null || break
  sleep 0.2
done
alive=$(kill -0 $pk 2>/dev/null && echo yes || echo no)
wal=$([ -e "$tmp/killed_bank/tune_bank.db-wal" ] && echo yes || echo no)
{ kill -9 $pk; wait $pk; } 2>/dev/null
check "the tuner was killed mid-run, after writing the bank and measuring" \
  "[ $alive = yes ] && [ $wal = yes ] && [ -f '$tmp/killed_bank/tune_bank.db' ] && [ \$(evals) -ge 2 ]"
ok2=$(integrity "$tmp/killed_bank/tune_bank.db")
"$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --tune-bank "$tmp/killed_bank" --output "$tmp/k2" >/dev/null 2>&1; rc=$?
check "a tuner killed with SIGKILL leaves the bank intact and usable" "[ '$ok2' = ok ] && [ $rc = 0 ]"
"$PORTKIT" tune --replay "$tmp/k/tune_landscape.jsonl" --strategy random --tune-bank "$tmp/bank_k3" --output "$tmp/k3" >/dev/null 2>"$tmp/k3.err"; rc=$?
check "the killed run's landscape (streamed) replays" "[ $rc = 0 ] && [ -n \"\$(ls '$tmp/k3'/aoe_result_opat_*.json)\" ]"
# The result file is written as tuning proceeds: the killed run left a valid one saying so.
kres=$(result "$tmp/k")
kstate=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['OPAT']['opat_tuning_result'])" "$kres" 2>&1)
check "a killed run leaves a valid result file marked 'tuning in progress'" "[ -n '$kres' ] && [ '$kstate' = 'tuning in progress' ]"

# A compiler that fails on every candidate: the run failed (exit 4), saying to check the compiler.
printf '#!/bin/sh\nif [ "$1" = --version ]; then echo "brokencc 1.0"; exit 0; fi\necho "brokencc: internal error" >&2; exit 1\n' >"$tmp/brokencc"
chmod +x "$tmp/brokencc"
"$PORTKIT" tune --model "$model" --compiler "$tmp/brokencc" --tune-bank "$tmp/bank_broken" --output "$tmp/broken" "${pin[@]}" >"$tmp/bc" 2>&1; rc=$?
check "a compiler failing on everything exits 4" "[ $rc = 4 ] && grep -q 'run failed: fc1 (MatMul): the toolchain cannot build a known-good kernel' '$tmp/bc' && grep -q 'brokencc: internal error' '$tmp/bc'"
bres=$(result "$tmp/broken")
check "a broken compiler records nothing as a property of a configuration; the result file says failed" \
  "! grep -q compile_error '$tmp/broken/tune_landscape.jsonl' 2>/dev/null && grep -q '\"opat_tuning_result\": \"tuning failed\"' '$bres'"
"$PORTKIT" tune --model "$model" --compiler "$tmp/no-such-cc" --tune-bank "$tmp/bank_broken" --output "$tmp/broken2" "${pin[@]}" >"$tmp/bc2" 2>&1; rc=$?
check "a missing compiler exits non-zero with a message" "[ $rc != 0 ] && grep -q 'no-such-cc' '$tmp/bc2'"
# A compiler that rejects one configuration (MR=4) and compiles the rest (through c++): that is a
# property of the configuration, recorded as compile_error, and the run succeeds.
printf '#!/bin/sh\nfor a in "$@"; do case "$a" in *.cc) if grep -q "define PK_MR 4$" "$a"; then echo "picky: MR=4 rejected" >&2; exit 1; fi;; esac; done\nexec c++ "$@"\n' >"$tmp/pickycc"
chmod +x "$tmp/pickycc"
"$PORTKIT" tune --model "$model" --compiler "$tmp/pickycc" --strategy exhaustive --tune-bank "$tmp/bank_picky" --output "$tmp/picky" \
  --max-evals 4 --repeats 5 "${pin[@]}" >"$tmp/pk" 2>&1; rc=$?
check "one configuration's compile error is a property: recorded, run succeeds" \
  "[ $rc = 0 ] && grep -q '\"status\": \"compile_error\"' '$tmp/picky/tune_landscape.jsonl' && ! grep -q 'run failed' '$tmp/pk'"
# Disk full mid-run: a file-size limit (SIGXFSZ ignored, so writes fail with EFBIG) small enough that
# the compiler's files do not fit. The run fails (exit 4) with a message, and no configuration is
# recorded as compile_error.
( trap '' XFSZ; ulimit -f 40; exec "$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_full" --output "$tmp/full" \
    --max-evals 2 --repeats 5 "${pin[@]}" ) >"$tmp/df" 2>&1; rc=$?
check "disk full (file-size limit) mid-run exits 4 and records no compile_error" \
  "[ $rc = 4 ] && grep -q 'run failed: ' '$tmp/df' && grep -q 'File size limit exceeded' '$tmp/df' && ! grep -q compile_error '$tmp/full/tune_landscape.jsonl' 2>/dev/null"

# Bank trust, on the recorded landscape (replay: both operators are added, deterministically). An
# imported entry never replaces a measured one (a valid configuration with a tiny time is kept out;
# THREADS=9999 is refused on import), and an entry poisoned in the database (THREADS=9999, 0.001 us)
# is never a hit nor written into the plan: it is re-tuned and replaced.
landscape=tests/data/tune/landscape_small.jsonl
pb="$tmp/bank_trust"
"$PORTKIT" tune --replay "$landscape" --strategy exhaustive --max-evals 1000 --tune-bank "$pb" --output "$tmp/t1" >/dev/null 2>&1; rc=$?
"$PORTKIT" tune bank export "$tmp/trust.json" --tune-bank "$pb" >/dev/null 2>&1
/usr/bin/python3 - "$tmp/trust.json" "$tmp/poison.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["entries"][0]
swap = ("UNROLL=1", "UNROLL=4") if "UNROLL=1" in e["config"] else ("UNROLL=4", "UNROLL=1")
good = dict(e, time_us=0.02, config=e["config"].replace(*swap))
bad = dict(e, time_us=0.001, config=e["config"].rsplit("THREADS=", 1)[0] + "THREADS=9999")
json.dump({"portkit_tune_bank": 1, "entries": [good, bad]}, open(sys.argv[2], "w"))
PY
"$PORTKIT" tune bank import "$tmp/poison.json" --tune-bank "$pb" >"$tmp/pi" 2>&1; rc2=$?
"$PORTKIT" tune bank export "$tmp/trust_after.json" --tune-bank "$pb" >/dev/null 2>&1
same=$(/usr/bin/python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['entries']; b=json.load(open(sys.argv[2]))['entries']; print('ok' if [(x['config'],x['time_us']) for x in a]==[(x['config'],x['time_us']) for x in b] and all(x['measured_here'] for x in b) else 'changed')" "$tmp/trust.json" "$tmp/trust_after.json")
check "poisoned import: THREADS=9999 refused, a faster imported time does not beat the measured entry" \
  "[ $rc = 0 ] && [ $rc2 = 0 ] && grep -q '0 added, 0 updated .* 1 kept .* 1 refused' '$tmp/pi' && grep -q 'THREADS=9999' '$tmp/pi' && [ '$same' = ok ]"
cp -r "$pb" "$tmp/bank_poisoned"
/usr/bin/python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute(\"UPDATE entries SET config = substr(config, 1, instr(config, 'THREADS=') - 1) || 'THREADS=9999', time_us = 0.001\"); db.commit()" "$tmp/bank_poisoned/tune_bank.db"
"$PORTKIT" tune --replay "$landscape" --strategy exhaustive --max-evals 1000 --tune-bank "$tmp/bank_poisoned" --output "$tmp/rpz" >"$tmp/pz" 2>&1; rc=$?
nines() { /usr/bin/python3 -c "import sqlite3,sys; print(sum('9999' in c for (c,) in sqlite3.connect(sys.argv[1]).execute('SELECT config FROM entries')))" "$1"; }
check "a poisoned bank entry (THREADS=9999, 0.001 us) is no hit, not in the plan, re-tuned and replaced" \
  "[ $rc = 0 ] && grep -q 'knowledge base entry is unusable' '$tmp/pz' && ! grep -q 'THREADS=9999' '$tmp/rpz/tuned_plan.json' && [ \$(num \$(result '$tmp/rpz') repo_hit_num) = 0 ] && [ \$(num \$(result '$tmp/rpz') repo_add_num) = 2 ] && [ \$(nines '$tmp/bank_poisoned/tune_bank.db') = 0 ]"

# A read-only bank (file 0444 in a 0555 folder) is usable for listing and lookups; a run that would
# tune says it cannot write it. Root ignores file modes: the commands then run as nobody.
asuser() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
if [ "$(id -u)" != 0 ] || command -v setpriv >/dev/null; then
  ro=$(mktemp -d /tmp/portkit_ro.XXXXXX); chmod 755 "$ro"; mkdir -p "$ro/bank" "$ro/out"; chmod 777 "$ro/out"
  cp "$pb/tune_bank.db" "$ro/bank/"; chmod 444 "$ro/bank/tune_bank.db"; chmod 555 "$ro/bank"
  asuser "$PORTKIT" tune bank list --tune-bank "$ro/bank" >"$tmp/rol" 2>&1; rc1=$?
  asuser "$PORTKIT" tune bank show MatMul --tune-bank "$ro/bank" >"$tmp/ros" 2>&1; rc4=$?
  asuser "$PORTKIT" tune --lookup-only --replay "$landscape" --tune-bank "$ro/bank" --output "$ro/out" >"$tmp/rolk" 2>&1; rc2=$?
  asuser "$PORTKIT" tune --replay "$landscape" --tune-bank "$ro/bank" --output "$ro/out" >"$tmp/rotune" 2>&1; rc3=$?
  rores=$(ls "$ro"/out/aoe_result_opat_*.json 2>/dev/null | head -1)
  check "a read-only bank lists and shows" "[ $rc1 = 0 ] && grep -q '2 entries in' '$tmp/rol' && [ $rc4 = 0 ]"
  check "a read-only bank serves a --lookup-only run (hits, nothing tuned)" \
    "[ $rc2 = 0 ] && [ -n '$rores' ] && [ \$(num '$rores' repo_hit_num) = 2 ] && [ \$(num '$rores' repo_add_num) = 0 ]"
  check "a tuning run on a read-only bank exits 2 saying so" "[ $rc3 = 2 ] && grep -q 'cannot be written.*--lookup-only' '$tmp/rotune'"
  chmod -R u+w "$ro"; rm -rf "$ro"
else
  echo "SKIP read-only bank checks (root without setpriv)"
fi

# Input checks: all before any tuning.
touch "$tmp/afile"
"$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_o" --output "$tmp/afile/out" "${pin[@]}" >"$tmp/y1" 2>&1; rc=$?
check "an unwritable --output exits 2 before tuning or touching the bank" \
  "[ $rc = 2 ] && grep -q -- '--output $tmp/afile/out cannot be created' '$tmp/y1' && [ ! -e '$tmp/bank_o' ] && ! grep -q 'default strategy' '$tmp/y1'"
"$PORTKIT" tune --model "$model" --max-seconds -1 --tune-bank "$tmp/bank_y" >"$tmp/y2" 2>&1; rc=$?
check "--max-seconds < 0 exits 2" "[ $rc = 2 ] && grep -q 'max-seconds' '$tmp/y2'"
"$PORTKIT" tune --model "$model" --patience -3 --tune-bank "$tmp/bank_y" >"$tmp/y3" 2>&1; rc=$?
check "--patience < 0 exits 2" "[ $rc = 2 ] && grep -q 'patience' '$tmp/y3'"
"$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_y" --output "$tmp/y" --fix VW=8 --fix NR=48 --fix MR=12 >"$tmp/y4" 2>&1; rc=$?
check "a --fix set no configuration satisfies exits 2" "[ $rc = 2 ] && grep -q 'no configuration of MatMul satisfies the constraints' '$tmp/y4'"
mkdir -p "$tmp/y10" && cp "$tmp/r1/tune_landscape.jsonl" "$tmp/y10/"
"$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_y" --output "$tmp/y10" --fix VW=8 --fix NR=48 --fix MR=12 >/dev/null 2>&1; rc=$?
check "a run stopped before measuring leaves an existing landscape alone" "[ $rc = 2 ] && cmp -s '$tmp/r1/tune_landscape.jsonl' '$tmp/y10/tune_landscape.jsonl'"
printf '{"kind": "landscape", "version": 1, "validators": "cores=2", "fix": ["BOGUS=1"]}\n{"kind": "op", "op": {"op_name": "f", "op_type": "MatMul", "inputs": [[4, 4], [4, 4]]}}\n' >"$tmp/badfix.jsonl"
"$PORTKIT" tune --replay "$tmp/badfix.jsonl" --tune-bank "$tmp/bank_y" --output "$tmp/y" >"$tmp/y5" 2>&1; rc=$?
check "a landscape fixing an unknown knob names the landscape file" "[ $rc = 2 ] && grep -q '$tmp/badfix.jsonl: fix: --fix BOGUS: unknown knob' '$tmp/y5'"
printf '{"kind": "landscape", "version": 1, "validators": "cores=2", "fix": []}\n' >"$tmp/empty.jsonl"
"$PORTKIT" tune --replay "$tmp/empty.jsonl" --tune-bank "$tmp/bank_y" --output "$tmp/y" >"$tmp/y6" 2>&1; rc=$?
check "a header-only landscape warns: no operators" "[ $rc = 0 ] && grep -q 'empty.jsonl: no operators to tune' '$tmp/y6'"
printf '{"ops": []}' >"$tmp/noops.json"
"$PORTKIT" tune --model "$tmp/noops.json" --tune-bank "$tmp/bank_y" --output "$tmp/y" >"$tmp/y7" 2>&1; rc=$?
check "an empty op list warns: no operators" "[ $rc = 0 ] && grep -q 'noops.json: no operators to tune' '$tmp/y7'"
printf '{"ops": [{"op_type": "Relu"}, {"op_name": "s", "op_type": "Softmax", "inputs": 5}]}' >"$tmp/relu.json"
"$PORTKIT" tune --model "$tmp/relu.json" --tune-bank "$tmp/bank_y" --output "$tmp/y8" >"$tmp/y8.log" 2>&1; rc=$?
check "unknown op types without (valid) inputs are untuned, not fatal" \
  "[ $rc = 0 ] && grep -q 'Relu (Relu) is not tuned' '$tmp/y8.log' && grep -q 's (Softmax) is not tuned' '$tmp/y8.log'"
printf '{"ops": [{"op_type": "Conv2D", "inputs": [[1, 8, 8, 8], [4, 8, 3, 3]], "attrs": {"padding": [4611686018427387904, 0]}}]}' >"$tmp/pad.json"
"$PORTKIT" tune --model "$tmp/pad.json" --tune-bank "$tmp/bank_y" >"$tmp/y9" 2>&1; rc=$?
check "huge padding is refused naming the field" "[ $rc = 2 ] && grep -q 'pad.json: ops\\[0\\].attrs.padding: padding must be between 0 and 1048576' '$tmp/y9'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
