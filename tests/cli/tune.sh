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

REPEAT_TUNE=True "$PORTKIT" tune --job_type=2 --model="$model" --tune-bank "$bank" --output "$tmp/r3" --max-evals 2 --repeats 5 "${pin[@]}" \
  >"$tmp/o3" 2>"$tmp/e3"; rc=$?
r3=$(result "$tmp/r3")
check "REPEAT_TUNE=True re-tunes: no hits; stored entries updated or reserved" \
  "[ $rc = 0 ] && [ \$(num '$r3' repo_hit_num) = 0 ] && [ \$(( \$(num '$r3' repo_update_num) + \$(num '$r3' repo_reserved_num) )) -ge \$(num '$r1' repo_add_num) ] && [ \$(num '$r3' total_num) = 2 ]"

for s in exhaustive random annealing genetic bandit; do
  "$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --strategy $s --tune-bank "$tmp/bank_$s" --output "$tmp/replay_$s" \
    --max-evals 3 >"$tmp/rp_$s" 2>&1; rc=$?
  check "replay with $s" "[ $rc = 0 ] && [ -n \"\$(ls '$tmp/replay_$s'/aoe_result_opat_*.json)\" ] && [ ! -e '$tmp/replay_$s/tune_landscape.jsonl' ]"
done

"$PORTKIT" tune bank --list --tune-bank "$bank" >"$tmp/bl" 2>&1; rc=$?
check "bank --list" "[ $rc = 0 ] && grep -q 'entries in $bank/tune_bank.db' '$tmp/bl'"
if [ "$(num "$r1" repo_add_num)" -gt 0 ]; then
  name=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['OPAT']['repo_modified_operators']['add_repo_operators'][0]['op_name'])" "$r1")
  "$PORTKIT" tune bank --show "$name" --tune-bank "$bank" >"$tmp/bs" 2>&1; rc=$?
  check "bank --show" "[ $rc = 0 ] && grep -q '^strategy: *MC=' '$tmp/bs'"
fi
"$PORTKIT" tune bank --export "$tmp/bank.json" --tune-bank "$bank" >/dev/null 2>&1 &&
  "$PORTKIT" tune bank --import "$tmp/bank.json" --tune-bank "$tmp/bank2" >"$tmp/bi" 2>&1; rc=$?
entries=$(/usr/bin/python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['entries']))" "$tmp/bank.json")
check "bank --export then --import into a new bank" "[ $rc = 0 ] && [ $entries -ge 1 ] && grep -q '$entries added, 0 updated' '$tmp/bi'"
"$PORTKIT" tune bank --show nosuchop --tune-bank "$bank" >"$tmp/bn" 2>&1; rc=$?
check "bank --show of an unknown operator exits 1" "[ $rc = 1 ] && grep -q \"no entry for 'nosuchop'\" '$tmp/bn'"

# Bad input: clear messages, non-zero exits, no crash.
printf '{"ops": [{"op_type": "MatMul", "inputs": [[2, 3], [4, 5]]}]}' >"$tmp/bad.json"
"$PORTKIT" tune --model "$tmp/bad.json" --tune-bank "$bank" >"$tmp/x1" 2>&1; rc=$?
check "malformed op list names file and field" "[ $rc = 2 ] && grep -q '$tmp/bad.json: ops\\[0\\].inputs: MatMul inner dimensions differ' '$tmp/x1'"
"$PORTKIT" tune --model "$tmp/missing.json" --tune-bank "$bank" >"$tmp/x2" 2>&1; rc=$?
check "missing model file exits 2" "[ $rc = 2 ] && grep -q 'missing.json' '$tmp/x2'"
"$PORTKIT" tune --tune-bank "$bank" >"$tmp/x3" 2>&1; rc=$?
check "no --model exits 2" "[ $rc = 2 ] && grep -q 'give --model FILE' '$tmp/x3'"
"$PORTKIT" tune --job-type=1 --model "$model" >"$tmp/x4" 2>&1; rc=$?
check "job type 1 is refused" "[ $rc = 2 ] && grep -q 'only operator tuning (2) is supported' '$tmp/x4'"
"$PORTKIT" tune --model "$model" --strategy hill --tune-bank "$tmp/bank_x" --output "$tmp/x" >"$tmp/x5" 2>&1; rc=$?
check "unknown strategy exits 2" "[ $rc = 2 ] && grep -q 'unknown strategy (strategies: exhaustive' '$tmp/x5'"
TE_PARALLEL_COMPILER=lots "$PORTKIT" tune --model "$model" --tune-bank "$tmp/bank_x" >"$tmp/x6" 2>&1; rc=$?
check "bad TE_PARALLEL_COMPILER exits 2" "[ $rc = 2 ] && grep -q 'TE_PARALLEL_COMPILER=lots' '$tmp/x6'"
printf '{"kind": "eval"}\n' >"$tmp/bad.jsonl"
"$PORTKIT" tune --replay "$tmp/bad.jsonl" --tune-bank "$tmp/bank_x" >"$tmp/x7" 2>&1; rc=$?
check "malformed landscape names file and line" "[ $rc = 2 ] && grep -q '$tmp/bad.jsonl:1: signature: missing' '$tmp/x7'"
"$PORTKIT" tune --help >"$tmp/h" 2>&1; rc=$?
check "--help renders every strategy's options" "[ $rc = 0 ] && grep -q 'cooling=0.93' '$tmp/h' && grep -q 'population=8' '$tmp/h' && grep -q 'TUNE_BANK_PATH' '$tmp/h'"

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
  "args": {"Input Dims": [[4, 3, 8, 8], [32, 3, 1, 1], [32], [], [], [], []], "Input type": ["float", "float", "float", "", "", "", ""]}}
]}
JSON
"$PORTKIT" prof import -dir "$tmp/prof" >/dev/null 2>&1
"$PORTKIT" tune --model "$tmp/prof" --tune-bank "$bank" --output "$tmp/rp" --max-evals 1 --repeats 5 "${pin[@]}" >"$tmp/op" 2>"$tmp/ep"; rc=$?
check "a profile folder: addmm and mm tuned, conv2d untuned" \
  "[ $rc = 0 ] && grep -q 'MatMul|float32|ND|\[4,32\],\[32,10\]|bias=1' '$tmp/rp/tuned_plan.json' && grep -q 'MatMul|float32|ND|\[10,4\],\[4,32\]|bias=0' '$tmp/rp/tuned_plan.json' && grep -q 'do not record the stride and padding' '$tmp/rp/tuned_plan.json'"
"$PORTKIT" tune --model "$tmp" --tune-bank "$bank" >"$tmp/x8" 2>&1; rc=$?
check "a folder without portkit.db exits 2" "[ $rc = 2 ] && grep -q 'no portkit.db; run .portkit prof import' '$tmp/x8'"

# Two tuners on one bank at once (replay: no compiles), and a tuner killed with SIGKILL mid-run:
# the bank stays consistent and usable.
shared="$tmp/shared_bank"
"$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --strategy random --tune-bank "$shared" --output "$tmp/c1" >/dev/null 2>"$tmp/c1.err" &
p1=$!
"$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --strategy genetic --tune-bank "$shared" --output "$tmp/c2" >/dev/null 2>"$tmp/c2.err" &
p2=$!
wait $p1; rc1=$?
wait $p2; rc2=$?
integrity() { /usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])" "$1"; }
ok1=$(integrity "$shared/tune_bank.db")
grep -h ERROR "$tmp/c1.err" "$tmp/c2.err"
check "two concurrent tuners on one bank: both succeed, bank intact" "[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ '$ok1' = ok ]"
"$PORTKIT" tune --model "$model" --tune-bank "$tmp/killed_bank" --output "$tmp/k" --max-evals 50 --patience 0 --strategy exhaustive \
  --fix MC=48,96 --fix NC=768 --fix KC=128 --fix VW=16 --fix PACK_A=1 --fix ORDER=0 --fix THREADS=1 >/dev/null 2>&1 &
pk=$!
sleep 2
kill -9 $pk 2>/dev/null
wait $pk 2>/dev/null
ok2=$(integrity "$tmp/killed_bank/tune_bank.db")
"$PORTKIT" tune --replay "$tmp/r1/tune_landscape.jsonl" --tune-bank "$tmp/killed_bank" --output "$tmp/k2" >/dev/null 2>&1; rc=$?
check "a tuner killed with SIGKILL leaves the bank intact and usable" "[ '$ok2' = ok ] && [ $rc = 0 ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
