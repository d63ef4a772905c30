#!/usr/bin/env bash
# The overwrite policy, walked row by row from its table in docs/safety.md (between the
# `outputs:begin` and `outputs:end` comments): every row has a case here and every case a row. A
# case plants a user's file where the command writes, then checks that the command refuses it
# (exit 2, the file unchanged), that --force replaces it, and that a second run replaces its own
# output without --force. Every run is under `timeout`.
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 300"
F=tests/fixtures/accuracy
trace=$(ls tests/data/traces/kineto/*.json.gz | head -1)
PY=/usr/bin/python3  # Debian's, with torch 1.13 (the companion's first test interpreter)
USER_TEXT='print("the user wrote this")'

plant() { mkdir -p "$(dirname "$1")" && printf '%s\n' "$USER_TEXT" >"$1"; }
untouched() { printf '%s\n' "$USER_TEXT" | cmp -s - "$1"; }
replaced() { [ -f "$1" ] && ! untouched "$1"; }

# file_case ID FILE COMMAND...: the command (with FILE among its outputs) is run three times:
# refused without --force, replacing with --force, and again without --force (its own file now).
file_case() {
  local id=$1 file=$2; shift 2
  local log="$tmp/$id"
  plant "$file"
  $T "$@" >"$log.1" 2>&1; local rc=$?
  check "$id: a user's $(basename "$file") is refused (exit 2)" "[ $rc = 2 ]"
  check "$id:   the message says so" "grep -q 'already exists and portkit did not write it\|is not a compare report' '$log.1'"
  check "$id:   the file is unchanged" "untouched '$file'"
  $T "$@" --force >"$log.2" 2>&1; rc=$?
  check "$id: --force replaces it" "[ $rc = 0 ] && replaced '$file'"
  $T "$@" >"$log.3" 2>&1; rc=$?
  check "$id: a second run replaces its own file without --force" "[ $rc = 0 ] && replaced '$file'"
}

# refusal_case ID FILE COMMAND...: only the refusal (the check comes before any work; the work
# itself, a model tuned or trained, is tested elsewhere).
refusal_case() {
  local id=$1 file=$2; shift 2
  plant "$file"
  $T "$@" >"$tmp/$id.1" 2>&1; local rc=$?
  check "$id: a user's $(basename "$file") is refused before any work (exit 2)" "[ $rc = 2 ]"
  check "$id:   the message says so" "grep -q 'already exists and portkit did not write it' '$tmp/$id.1'"
  check "$id:   the file is unchanged" "untouched '$file'"
}

# A profile folder with one imported trace, made once.
prof="$tmp/prof"
mkdir -p "$prof" && cp "$trace" "$prof/"
"$PORTKIT" prof import -dir "$prof" >/dev/null 2>&1

# folder_case ID COMMAND FOLDER: the command (-i P -o OUT) makes OUT/p_FOLDER; a folder of that
# name it did not write is refused, --force writes into it (`expect_user_file`: whether the user's
# t.py there is kept or is replaced by the copy), and a second run writes into its own folder.
folder_case() {
  local id=$1 command=$2 folder=$3 expect_user_file=$4
  mkdir -p "$tmp/$id/p" "$tmp/$id/o/p_$folder" && printf 'import torch\nx = torch.randn(2).cuda()\n' >"$tmp/$id/p/t.py"
  plant "$tmp/$id/o/p_$folder/t.py"
  $T "$PORTKIT" "$command" -i "$tmp/$id/p" -o "$tmp/$id/o" >"$tmp/$id.1" 2>&1
  check "$id: a folder p_$folder it did not write is refused (exit 2)" "[ $? = 2 ] && untouched '$tmp/$id/o/p_$folder/t.py'"
  $T "$PORTKIT" "$command" -i "$tmp/$id/p" -o "$tmp/$id/o" --force >/dev/null 2>&1
  check "$id: --force writes into it (the user's file $expect_user_file)" "[ $? = 0 ] && $expect_user_file '$tmp/$id/o/p_$folder/t.py'"
  $T "$PORTKIT" "$command" -i "$tmp/$id/p" -o "$tmp/$id/o" >/dev/null 2>&1
  check "$id: a second run writes into its own folder" "[ $? = 0 ]"
}

case_analyse() { folder_case analyse analyse analysis untouched; }

case_migrate() { folder_case migrate migrate msft replaced; }

case_compare() {
  file_case compare "$tmp/cmp/compare_result.csv" "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$tmp/cmp" --format csv,json
}

case_overflow() {
  file_case overflow "$tmp/ovf/report.txt" "$PORTKIT" overflow "$F/overflow" -o "$tmp/ovf/report.txt"
}

case_convert() {
  "$PORTKIT" convert -d "$F/ref" -out "$tmp/cv_probe" >/dev/null 2>&1
  name=$(ls "$tmp/cv_probe" | grep '\.npy$' | head -1)
  file_case convert "$tmp/cv/$name" "$PORTKIT" convert -d "$F/ref" -out "$tmp/cv"
}

case_extract() {
  cp -r "$F/tgt" "$tmp/ex_other"
  before=$(md5sum <"$tmp/ex_other/manifest.jsonl")
  $T "$PORTKIT" extract -i "$F/ref" -o "$tmp/ex_other" -s 0 >"$tmp/ex.1" 2>&1
  check "extract: an existing dump is refused (exit 2) and unchanged" "[ $? = 2 ] && [ \"\$(md5sum <'$tmp/ex_other/manifest.jsonl')\" = '$before' ]"
  $T "$PORTKIT" extract -i "$F/ref" -o "$tmp/ex_other" -s 0 --force >/dev/null 2>&1
  check "extract: --force replaces it" "[ $? = 0 ] && [ \"\$(md5sum <'$tmp/ex_other/manifest.jsonl')\" != '$before' ]"
}

case_prof_collect() {
  mkdir -p "$tmp/pc" && printf 'import torch\ntorch.ones(2) + 1\n' >"$tmp/pc_step.py"
  for run in 1 2; do
    $T "$PORTKIT" prof collect --output "$tmp/pc" -- "$PY" "$tmp/pc_step.py" >"$tmp/pc.$run" 2>&1
  done
  n=$(ls "$tmp/pc" | grep -c '^PROF_' || true)
  check "prof collect: each run writes a new PROF_ folder (never an existing one)" "[ '$n' = 2 ]"
}

case_prof_import() {
  mkdir -p "$tmp/pi" && cp "$trace" "$tmp/pi/" && plant "$tmp/pi/portkit.db"
  $T "$PORTKIT" prof import -dir "$tmp/pi" >"$tmp/pi.1" 2>&1
  check "prof import: a portkit.db that is not its store is refused (exit 2) and unchanged" "[ $? = 2 ] && untouched '$tmp/pi/portkit.db'"
}

case_prof_summary() {
  file_case prof_summary "$tmp/ps/op_summary.csv" "$PORTKIT" prof export summary -dir "$prof" -o "$tmp/ps"
}

case_prof_timeline() {
  file_case prof_timeline "$tmp/pt/train.py" "$PORTKIT" prof export timeline -dir "$prof" -o "$tmp/pt/train.py"
}

case_prof_analyse() {
  file_case prof_analyse "$tmp/pa/advisor.txt" "$PORTKIT" prof analyse -dir "$prof" -o "$tmp/pa"
}

case_prof_diff() {
  mkdir -p "$tmp/prof2" && cp "$trace" "$tmp/prof2/"
  file_case prof_diff "$tmp/pd/diff.json" "$PORTKIT" prof diff "$prof" "$tmp/prof2" -o "$tmp/pd" --format json
}

case_prof_cluster() {
  mkdir -p "$tmp/ranks" && cp tests/data/traces/kineto/timeline_analysis__sampled_rank-0.json.gz "$tmp/ranks/"
  file_case prof_cluster "$tmp/pcl/cluster_report.txt" "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/pcl" --format text
}

case_tune_opat() {
  file_case tune_opat "$tmp/to/tuned_plan.json" "$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl \
    --max-evals 2 --tune-bank "$tmp/to_bank" --output "$tmp/to"
}

case_tune_bank_export() {
  "$PORTKIT" tune --replay tests/data/tune/landscape_small.jsonl --max-evals 2 --tune-bank "$tmp/tb_bank" \
    --output "$tmp/tb_run" >/dev/null 2>&1
  file_case tune_bank_export "$tmp/tb/train.py" "$PORTKIT" tune bank export "$tmp/tb/train.py" --tune-bank "$tmp/tb_bank"
}

case_tune_sgat() {
  refusal_case tune_sgat "$tmp/ts/optimized.pt" "$PORTKIT" tune --framework=pytorch \
    --model=examples.tune.models:make_mlp --input 4x64 --output "$tmp/ts"
}

case_tune_gdat() {
  refusal_case tune_gdat "$tmp/tg/gdat_settings.json" "$PORTKIT" tune --job-type=4 \
    --simulate tests/data/tune/small_model.json --output "$tmp/tg"
}

case_export_ops() {
  refusal_case export_ops "$tmp/eo/ops.json" env PYTHONPATH=python "$PY" -m portkit.export_ops \
    --model examples.tune.models:make_mlp --input 4x64 -o "$tmp/eo/ops.json"
}

case_dumper() {
  mkdir -p "$tmp/du" && plant "$tmp/du/manifest.jsonl"
  PYTHONPATH=python $T "$PY" -c "
import sys
from portkit.torch.dumper import dumper
try:
    with dumper('$tmp/du'):
        pass
except FileExistsError as e:
    sys.exit(2)
" >"$tmp/du.1" 2>&1; rc=$?
  check "dumper: a folder holding a dump is refused" "[ $rc = 2 ]"
  check "dumper:   the manifest is unchanged" "untouched '$tmp/du/manifest.jsonl'"
}

case_msprobe_convert() {
  mkdir -p "$tmp/ms_src" "$tmp/ms_out" && echo '{"task": "statistics", "data": {}}' >"$tmp/ms_src/dump.json"
  plant "$tmp/ms_out/manifest.jsonl"
  PYTHONPATH=python $T "$PY" -m portkit.msprobe "$tmp/ms_src" "$tmp/ms_out" >"$tmp/ms.1" 2>&1
  check "msprobe convert: a folder holding a dump is refused (exit 2) and unchanged" "[ $? = 2 ] && untouched '$tmp/ms_out/manifest.jsonl'"
}

# The table's rows, and a case for each.
ids=$(sed -n '/<!-- outputs:begin -->/,/<!-- outputs:end -->/p' docs/safety.md | grep -o '^| `[a-z_]*`' | tr -d '|` ')
check "the outputs table of docs/safety.md has rows" "[ -n \"$ids\" ]"
for id in $ids; do
  if declare -F "case_$id" >/dev/null; then "case_$id"; else check "table row $id has a test case" false; fi
done
for f in $(declare -F | awk '{print $3}' | grep '^case_'); do
  # A here-string, not echo | grep -q: under pipefail, grep leaving early makes echo's SIGPIPE fail the check.
  check "case ${f#case_} has a row in the table" "grep -qx '${f#case_}' <<< \"$ids\""
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
