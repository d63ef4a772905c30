#!/usr/bin/env bash
# Golden tests: run `portkit analyse` on fixture projects and compare every output file with the
# expected copy under tests/golden/<case>/. UPDATE_GOLDENS=1 rewrites the expected files.
source "$(dirname "$0")/../cli/harness.sh"

run_case() {  # name input [args...]
  local name=$1 input=$2
  shift 2
  local out="$tmp/$name"
  if ! "$PORTKIT" analyse -i "$input" -o "$out" -j 2 "$@" >"$out.stdout" 2>"$out.stderr"; then
    echo "FAIL $name: portkit exited non-zero"; cat "$out.stderr"; fail=$((fail + 1)); return
  fi
  local results="$out/$(basename "$input")_analysis"
  local expected="tests/golden/$name"
  if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
    rm -rf "$expected" && mkdir -p "$expected"
    for f in "$results"/*; do
      [ "$(basename "$f")" = pytorch_analysis.txt ] || cp "$f" "$expected/"
    done
    cp "$out.stdout" "$expected/stdout.txt"
    echo "updated $expected"
    return
  fi
  local ok=1
  for f in "$expected"/*; do
    local base
    base=$(basename "$f")
    local actual="$results/$base"
    [ "$base" = stdout.txt ] && actual="$out.stdout"
    if ! diff -u "$f" "$actual" >"$out.diff" 2>&1; then
      echo "FAIL $name: $base differs from the golden copy"; head -40 "$out.diff"; ok=0
    fi
  done
  # Every output file that exists must have a golden copy (nothing new goes unreviewed).
  for f in "$results"/*; do
    local base
    base=$(basename "$f")
    [ "$base" = pytorch_analysis.txt ] && continue
    [ -f "$expected/$base" ] || { echo "FAIL $name: no golden copy of $base"; ok=0; }
  done
  # The log holds the progress lines and the summary table.
  grep -q '\[INFO\]    \[Progress:100.00%\]  Analyse run success' "$results/pytorch_analysis.txt" ||
    { echo "FAIL $name: pytorch_analysis.txt lacks the final progress line"; ok=0; }
  grep -q '|         files          | statistics |\|files.*statistics' "$results/pytorch_analysis.txt" ||
    { echo "FAIL $name: pytorch_analysis.txt lacks the summary table"; ok=0; }
  # Nothing but the results folder is written under the output folder.
  local extra
  extra=$(find "$out" -mindepth 1 -maxdepth 1 ! -name "$(basename "$input")_analysis")
  [ -z "$extra" ] || { echo "FAIL $name: unexpected files in output: $extra"; ok=0; }
  if [ $ok = 1 ]; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); fi
}

run_case analyse_cifar_npu_2.1 examples/cifar_cuda -v 2.1.0
run_case analyse_cifar_npu_2.8 examples/cifar_cuda -v 2.8.0
run_case analyse_cifar_cpu examples/cifar_cuda --target cpu
run_case analyse_resolver_npu_2.1 tests/fixtures/analyse/resolver -v 2.1.0
run_case analyse_precision_npu_2.1 tests/fixtures/analyse/precision -v 2.1.0
run_case analyse_precision_cpu tests/fixtures/analyse/precision --target cpu
run_case analyse_cifar_sarif examples/cifar_cuda -v 2.1.0 --format sarif
# affinity_apis: one fixture and golden per rule.
for rule in tests/fixtures/affinity/*/; do
  rule=$(basename "$rule")
  run_case "affinity_$rule" "tests/fixtures/affinity/$rule" -m affinity_apis --format csv
done
# third_party on a library, then -api on a user script of it.
run_case third_party_lib tests/fixtures/third_party/mylib -m third_party -v 2.1.0
run_case third_party_user_api tests/fixtures/third_party/user -v 2.1.0 \
  -api tests/golden/third_party_lib/full_unsupported_results.csv

# prof: import + export summary of every reference trace; goldens of the summaries (op_summary,
# one row per device task, is kept as its header and row count).
prof_case() {  # trace-file
  local trace=$1 name
  name=prof_$(basename "$trace" | sed -e 's/\.json\.gz$//' -e 's/\.json$//' -e 's/\.csv$//')
  local dir="$tmp/$name"
  mkdir -p "$dir" && cp "$trace" "$dir/"
  if ! "$PORTKIT" prof import -dir "$dir" >/dev/null 2>"$dir.err" ||
     ! "$PORTKIT" prof export summary -dir "$dir" >/dev/null 2>>"$dir.err"; then
    echo "FAIL $name: portkit prof failed"; cat "$dir.err"; fail=$((fail + 1)); return
  fi
  { head -1 "$dir/summary/op_summary.csv"; echo "rows: $(($(wc -l < "$dir/summary/op_summary.csv") - 1))"; } \
    > "$dir/summary/op_summary.shape"
  local expected="tests/golden/$name"
  if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
    rm -rf "$expected" && mkdir -p "$expected"
    for f in op_summary.shape op_statistic.csv api_statistic.csv kernel_statistic.csv step_trace.csv host_op_summary.csv; do
      cp "$dir/summary/$f" "$expected/"
    done
    echo "updated $expected"
    return
  fi
  local ok=1
  for f in "$expected"/*; do
    diff -u "$f" "$dir/summary/$(basename "$f")" >"$dir.diff" 2>&1 ||
      { echo "FAIL $name: $(basename "$f") differs"; head -20 "$dir.diff"; ok=0; }
  done
  if [ $ok = 1 ]; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); fi
}
for trace in tests/data/traces/kineto/*.json.gz tests/data/traces/ascend/trace_view.json tests/data/traces/ascend/kernel_details.csv; do
  prof_case "$trace"
done

# compare: the hand-made dump pair (tests/fixtures/accuracy/make_fixture.py) → the three reports.
compare_case() {  # name [args...]
  local name=$1
  shift
  local out="$tmp/$name"
  if ! "$PORTKIT" compare tests/fixtures/accuracy/ref tests/fixtures/accuracy/tgt -o "$out" -j 2 "$@" \
       >"$out.stdout" 2>"$out.stderr"; then
    echo "FAIL $name: portkit compare exited non-zero"; cat "$out.stderr"; fail=$((fail + 1)); return
  fi
  cp "$out.stdout" "$out/stdout.txt"
  local expected="tests/golden/$name"
  if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
    rm -rf "$expected" && mkdir -p "$expected" && cp "$out"/* "$expected/"
    echo "updated $expected"
    return
  fi
  local ok=1
  for f in "$out"/*; do
    diff -u "$expected/$(basename "$f")" "$f" >"$out.diff" 2>&1 ||
      { echo "FAIL $name: $(basename "$f") differs from the golden copy"; head -20 "$out.diff"; ok=0; }
  done
  if [ $ok = 1 ]; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); fi
}
compare_case compare_fixture
compare_case compare_fixture_match_name --match name

echo "golden: $pass passed, $fail failed"
[ $fail = 0 ]
