#!/usr/bin/env bash
# A target complete as data: PORTKIT_DATA_DIR holding nothing but one target's target.json
# (tests/fixtures/targets/only_json: device "tdev", module torch_tdev, device module torch.tdev,
# backend "tccl", communication kernels "tccl") is laid over the shipped data and drives analyse,
# migrate, tune's GDAT, prof analyse and prof cluster; so does a full copy of the shipped npu target
# under another name. Missing keys and two defaults are errors naming the files.
source "$(dirname "$0")/harness.sh"

root=$(pwd)
only="$root/tests/fixtures/targets/only_json"
bare="$root/tests/fixtures/targets/only_json_nomodule"
project=tests/fixtures/targets/cuda_project

# analyse: CUDA code is code to migrate to the accelerator, not "unavailable on a CPU".
PORTKIT_DATA_DIR="$only" "$PORTKIT" analyse -i "$project" -o "$tmp/a" --target tdev --format json >/dev/null 2>"$tmp/a.err"; rc=$?
res="$tmp/a/cuda_project_analysis/report.json"
check "analyse --target tdev (only a target.json) exits 0" "[ $rc = 0 ]"
check "analyse reports CUDA code as code to migrate for tdev" "grep -q 'CUDA-specific API torch.cuda.synchronize: migrate for tdev (use torch.tdev.synchronize' '$res'"
check "analyse never calls the accelerator a CPU-only deployment" "! grep -q 'CPU-only deployment' '$res'"
check "analyse names tdev's derived renames" "grep -q 'use .tdev()' '$res' && grep -qF 'use \\\"tccl\\\"' '$res'"
check "no npu name in the tdev results" "! grep -qE '(^|[^a-z])npu|NPU' '$res'"

# migrate: no torch.cuda left, no npu code written.
PORTKIT_DATA_DIR="$only" "$PORTKIT" migrate -i "$project" -o "$tmp/m" --target tdev >/dev/null 2>"$tmp/m.err"; rc=$?
out="$tmp/m/cuda_project_msft/train.py"
check "migrate --target tdev exits 0" "[ $rc = 0 ]"
check "torch.cuda.X becomes <device_module>.X" "grep -q 'torch.tdev.synchronize()' '$out'"
check "derived renames: .tdev(), is_tdev, \"tdev:0\", \"tccl\", the env var" "grep -q 'Net().tdev()' '$out' && grep -q 'x.is_tdev' '$out' && grep -q '\"tdev:0\"' '$out' && grep -q 'init_process_group(\"tccl\")' '$out' && grep -q 'TDEV_VISIBLE_DEVICES' '$out'"
check "the import line is added" "grep -qx 'import torch_tdev' '$out'"
check "no torch.cuda, cuda device string, nccl or npu left in the copy" "! grep -rqi -e 'torch\\.cuda' -e '\"cuda' -e nccl -e npu -e '\\.cuda()' '$tmp/m/cuda_project_msft' --include=*.py"

# A target without a device module: torch.cuda calls stay, with one warning per file.
PORTKIT_DATA_DIR="$bare" "$PORTKIT" migrate -i "$project" -o "$tmp/b" --target tdev_bare --format json >/dev/null 2>"$tmp/b.err"; rc=$?
check "migrate --target tdev_bare exits 0 and keeps torch.cuda" "[ $rc = 0 ] && grep -q 'torch.cuda.synchronize()' '$tmp/b/cuda_project_msft/train.py'"
check "the warning names the file, the target and its target.json" "grep -qF 'cuda_project/train.py:26: 1 use of torch.cuda left in place (first here): target tdev_bare names no device_module in $bare/targets/tdev_bare/target.json, so the migrated code keeps calling CUDA' '$tmp/b.err'"
check "the warning is in change_list.json" "grep -q '\"kind\": *\"cuda_left\"' '$tmp/b/cuda_project_msft_report/change_list.json'"

# The shipped targets stay choices beside the added one; the shipped default stays the default.
PORTKIT_DATA_DIR="$only" "$PORTKIT" migrate --help >"$tmp/help" 2>&1
check "migrate --help lists the shipped targets and tdev" "grep -q 'npu, tdev (default npu)' '$tmp/help'"

# A full copy of the shipped npu target under another name gives the same migration.
mkdir -p "$tmp/full/targets"
cp -r data/targets/npu "$tmp/full/targets/npu_copy"
sed -i -e 's/"name": "npu"/"name": "npu_copy"/' -e '/"default": true,/d' "$tmp/full/targets/npu_copy/target.json"
PORTKIT_DATA_DIR="$tmp/full" "$PORTKIT" migrate -i "$project" -o "$tmp/fc" --target npu_copy >/dev/null 2>&1; rc1=$?
"$PORTKIT" migrate -i "$project" -o "$tmp/fn" --target npu >/dev/null 2>&1; rc2=$?
check "migrate with the full copy equals migrate with npu" "[ $rc1 = 0 ] && [ $rc2 = 0 ] && diff -r '$tmp/fc/cuda_project_msft' '$tmp/fn/cuda_project_msft' -x migration_log.txt -x .portkit-output"
PORTKIT_DATA_DIR="$tmp/full" "$PORTKIT" analyse -i "$project" -o "$tmp/ac" --target npu_copy -v 2.1.0 --format csv >/dev/null 2>&1; rc=$?
check "analyse with the full copy reads its support lists" "[ $rc = 0 ] && grep -rq 'torch.cdist' '$tmp/ac/cuda_project_analysis'"

# tune GDAT: the backend choices come from the target data.
PORTKIT_DATA_DIR="$only" "$PORTKIT" tune --job-type=4 --simulate examples/gdat/mlp_comm_bound.json --target tdev --backend hccl --output "$tmp/g" >/dev/null 2>"$tmp/g.err"; rc=$?
check "GDAT refuses a backend the target does not have, naming the choices" "[ $rc = 2 ] && grep -qF -- '--backend hccl: not a process-group backend of target tdev ($only/targets/tdev/target.json); choose one of gloo, nccl, tccl' '$tmp/g.err'"
PORTKIT_DATA_DIR="$only" "$PORTKIT" tune --job-type=4 --simulate examples/gdat/mlp_comm_bound.json --target npu --backend tccl --output "$tmp/g2" >/dev/null 2>"$tmp/g2.err"; rc=$?
check "GDAT with npu refuses tccl and offers hccl" "[ $rc = 2 ] && grep -q 'choose one of gloo, hccl, nccl' '$tmp/g2.err'"
PORTKIT_DATA_DIR="$only" "$PORTKIT" tune --job-type=4 --simulate examples/gdat/mlp_comm_bound.json --target tdev --backend tccl --output "$tmp/g3" >"$tmp/g3.out" 2>&1; rc=$?
check "GDAT --simulate with the tdev target and its backend runs" "[ $rc = 0 ] && [ -f '$tmp/g3/gdat_settings.json' ]"

# prof analyse and prof cluster: the target's profile.communication_kernels ("tccl" for tdev) mark
# communication. tests/fixtures/targets/tdev_ranks: two ranks, each with a 100 us gemm_kernel, a
# 40 us tccl_ring_reduce_kernel and a 30 us hcom_allReduce task (HCCL's name, npu's communication).
ranks=tests/fixtures/targets/tdev_ranks
mkdir -p "$tmp/prof"
cp "$ranks/rank0.json" "$tmp/prof/"
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof import -dir "$tmp/prof" >/dev/null 2>&1
split() {  # the device compute and communication ns of an advisor.json
  python3 -c 'import json,sys; d={x["what"]: x["ns"] for x in json.load(open(sys.argv[1]))["time_split"]}; print(d["device compute"], d["device communication"])' "$1"
}
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof analyse -dir "$tmp/prof" -o "$tmp/pa_tdev" --target tdev --format json >/dev/null 2>"$tmp/pa_tdev.err"; rc=$?
check "prof analyse --target tdev: the tccl kernel is communication, the hcom_ task computation" "[ $rc = 0 ] && [ \"\$(split '$tmp/pa_tdev/advisor.json')\" = '130000 40000' ]"
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof analyse -dir "$tmp/prof" -o "$tmp/pa_npu" --format json >/dev/null 2>&1; rc=$?
check "prof analyse with the default target (npu): the hcom_ task is communication, tccl computation" "[ $rc = 0 ] && [ \"\$(split '$tmp/pa_npu/advisor.json')\" = '140000 30000' ]"

mkdir -p "$tmp/ranks"
cp "$ranks"/rank0.json "$ranks"/rank1.json "$tmp/ranks/"
cluster_split() {  # per rank: communication tasks, compute and communication us of a cluster_report.json
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
tasks = {r["rank"]: r["communication_tasks"] for r in d["ranks"]}
print(" ".join("%d:%d,%g,%g" % (b["rank"], tasks[b["rank"]], b["total"]["compute_us"], b["total"]["communication_us"]) for b in d["temporal_breakdown"]))' "$1"
}
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/ct" --target tdev --format json --no-timeline >/dev/null 2>"$tmp/ct.err"; rc=$?
check "prof cluster --target tdev: one communication task per rank, the tccl kernel (40 us)" "[ $rc = 0 ] && [ \"\$(cluster_split '$tmp/ct/cluster_report.json')\" = '0:1,130,40 1:1,130,40' ]"
check "prof cluster --target tdev matches the tccl kernels of both ranks as one collective" "python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert len(c) == 1 and sorted(r[\"rank\"] for r in c[0][\"ranks\"]) == [0, 1], c' '$tmp/ct/cluster_communication.json'"
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/ctp" --target "$only/targets/tdev" --format json --no-timeline >/dev/null 2>&1; rc=$?
check "prof cluster --target PATH reads that target.json" "[ $rc = 0 ] && [ \"\$(cluster_split '$tmp/ctp/cluster_report.json')\" = '0:1,130,40 1:1,130,40' ]"
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/cn" --format json --no-timeline >/dev/null 2>&1; rc=$?
check "prof cluster with the default target (npu): the hcom_ task is communication, tccl computation" "[ $rc = 0 ] && [ \"\$(cluster_split '$tmp/cn/cluster_report.json')\" = '0:1,140,30 1:1,140,30' ]"
PORTKIT_DATA_DIR="$only" "$PORTKIT" prof cluster -dir "$tmp/ranks" --target nosuch >/dev/null 2>"$tmp/cx.err"; rc=$?
check "prof cluster --target nosuch exits 2 naming the choices, before writing anything" "[ $rc = 2 ] && grep -qF \"unknown target 'nosuch'; available targets: cpu, npu, tdev (or the path of a folder holding a target.json)\" '$tmp/cx.err' && [ ! -e '$tmp/ranks/cluster_analysis_output' ]"

# Exactly one default: two are an error naming both files.
mkdir -p "$tmp/two/targets/d1" "$tmp/two/targets/d2"
for n in d1 d2; do
  printf '{"name": "%s", "kind": "accelerator", "device_type": "%s", "default": true}\n' $n $n >"$tmp/two/targets/$n/target.json"
done
PORTKIT_DATA_DIR="$tmp/two" "$PORTKIT" analyse -i "$project" -o "$tmp/d" >/dev/null 2>"$tmp/d.err"; rc=$?
check "two more defaults (three with npu) exit 2 naming every file" "[ $rc = 2 ] && grep -qF \"more than one default target: $tmp/two/targets/d1/target.json, $tmp/two/targets/d2/target.json and $root/data/targets/npu/target.json each say \\\"default\\\": true; keep it in one of them, or name the target with --target\" '$tmp/d.err'"
rm "$tmp/two/targets/d2/target.json"
PORTKIT_DATA_DIR="$tmp/two" "$PORTKIT" migrate -i "$project" -o "$tmp/d2" >/dev/null 2>"$tmp/d2.err"; rc=$?
check "a copied default beside npu's is an error, not a silent change" "[ $rc = 2 ] && grep -qF \"more than one default target: $tmp/two/targets/d1/target.json and $root/data/targets/npu/target.json each say\" '$tmp/d2.err'"

# Missing required keys: each is named, with the file.
mkdir -p "$tmp/miss"
echo '{"name": "m"}' >"$tmp/miss/target.json"
"$PORTKIT" migrate -i "$project" -o "$tmp/mm" --target "$tmp/miss" >/dev/null 2>"$tmp/mm.err"; rc=$?
check "missing keys exit 2 naming the file and each key" "[ $rc = 2 ] && grep -qF \"$tmp/miss/target.json: missing required keys \\\"kind\\\", \\\"device_type\\\" (docs/targets.md describes target.json)\" '$tmp/mm.err'"

# The shipped targets and the fixtures follow the JSON Schema (skipped without jsonschema).
if python3 -c 'import jsonschema' 2>/dev/null; then
  check "target.json files validate against data/target.schema.json" "python3 -c '
import json, sys, jsonschema
schema = json.load(open(\"data/target.schema.json\"))
for f in sys.argv[1:]:
    jsonschema.validate(json.load(open(f)), schema)
' data/targets/*/target.json tests/fixtures/targets/*/target.json tests/fixtures/targets/*/targets/*/target.json"
else
  echo "skip target.json schema check (python3 has no jsonschema)"
fi
echo "target_data: $pass passed, $fail failed"
[ $fail = 0 ]
