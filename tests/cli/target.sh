#!/usr/bin/env bash
# The target is data: a test-only target defined purely by files (tests/fixtures/targets/xpu, a
# fictitious device "xpu" with module torch_xpu and backend "xccl") runs through analyse, migrate
# and the prof advisor, by path and by name, and its names appear in the outputs.
source "$(dirname "$0")/harness.sh"

xpu=tests/fixtures/targets/xpu
project=tests/fixtures/targets/cuda_project
root=$(pwd)
# A data folder with the xpu target beside the shipped ones, and one with only xpu (its default).
for d in all only; do
  mkdir -p "$tmp/data_$d/targets"
  for f in advisor cuda python; do ln -s "$root/data/$f" "$tmp/data_$d/$f"; done
  ln -s "$root/$xpu" "$tmp/data_$d/targets/xpu"
done
ln -s "$root/data/targets/npu" "$tmp/data_all/targets/npu"
ln -s "$root/data/targets/cpu" "$tmp/data_all/targets/cpu"

# analyse, --target PATH
"$PORTKIT" analyse -i "$project" -o "$tmp/a" --target "$xpu" >"$tmp/a.out" 2>"$tmp/a.err"; rc=$?
res="$tmp/a/cuda_project_analysis"
check "analyse --target PATH exits 0" "[ $rc = 0 ]"
check "analyse names the target and its list" "grep -q 'Target xpu, support list of torch 2.5' '$tmp/a.err'"
check "the xpu support list marks torch.cdist unsupported" "grep -q 'torch.cdist' '$res/pytorch_unsupported_results.csv' 2>/dev/null || grep -rq 'torch.cdist' '$res'"
check "tips name the xpu replacements" "grep -q 'use .xpu()' '$res/report.json' && grep -qF 'use \\\"xpu:0\\\"' '$res/report.json' && grep -qF 'use \\\"xccl\\\"' '$res/report.json' && grep -q 'use torch_xpu.xpu.synchronize' '$res/report.json'"
check "no npu name in the xpu results" "! grep -rqE '(^|[^a-z])npu|NPU' '$res'"
check "the xpu advice.json is used" "grep -rq 'XPU_TASK_QUEUE' '$res'"
"$PORTKIT" analyse -i "$project" -o "$tmp/af" --target "$xpu" -m affinity_apis --format csv >/dev/null 2>&1; rc=$?
aff=$(cat "$tmp/af/cuda_project_analysis"/*.csv)
check "affinity_apis with xpu exits 0" "[ $rc = 0 ]"
check "affinity names the xpu fused APIs and templates" "grep -q torch_xpu.fused_rms_norm <<<\"\$aff\" && grep -q torch_xpu.optim.FusedAdamW <<<\"\$aff\" && grep -q torch_xpu.fused_index_put <<<\"\$aff\" && grep -q torch_xpu.contrib.roll <<<\"\$aff\""
check "affinity is silent where xpu names no fused API" "! grep -qE '(^|[^a-z])npu' <<<\"\$aff\""

# migrate, --target PATH
"$PORTKIT" migrate -i "$project" -o "$tmp/m" --target "$xpu" --unsafe >"$tmp/m.out" 2>"$tmp/m.err"; rc=$?
out="$tmp/m/cuda_project_msft/train.py"
check "migrate --target PATH exits 0" "[ $rc = 0 ]"
check "migrated code imports torch_xpu after torch" "grep -A1 -x 'import torch' '$out' | grep -qx 'import torch_xpu'"
check "migrated code uses .xpu(), \"xpu:0\", \"xccl\", is_xpu" "grep -q 'Net().xpu()' '$out' && grep -q '\"xpu:0\"' '$out' && grep -q 'init_process_group(\"xccl\")' '$out' && grep -q 'x.is_xpu' '$out'"
check "migrated code renames the env var and torch.cuda" "grep -q 'XPU_VISIBLE_DEVICES' '$out' && grep -q 'torch.xpu.synchronize()' '$out'"
check "--unsafe applies the xpu fused APIs" "grep -q 'torch_xpu.optim.FusedAdamW(' '$out' && grep -q 'x = torch_xpu.fused_index_put(x, cond, 0.0)' '$out'"
check "no cuda or npu names remain" "! grep -qi -e npu -e '\"cuda' -e 'torch.cuda' -e 'nccl' -e 'CUDA_VISIBLE' '$out'"
check "migrate's log names the transfer import" "grep -q 'from torch_xpu.contrib import transfer_to_xpu' '$tmp/m.err'"

# The default target (npu) takes the same facts from data/targets/npu/target.json.
mkdir -p "$tmp/np"
printf 'import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\nacts = [torch.profiler.ProfilerActivity.CUDA]\n' >"$tmp/np/p.py"
"$PORTKIT" migrate -i "$tmp/np" -o "$tmp/npo" >/dev/null 2>&1; rc=$?
check "npu: env var and ProfilerActivity.CUDA renamed, torch_npu imported" "[ $rc = 0 ] && grep -q 'ASCEND_RT_VISIBLE_DEVICES' '$tmp/npo/np_msft/p.py' && grep -q 'torch_npu.profiler.ProfilerActivity.NPU' '$tmp/npo/np_msft/p.py' && grep -qx 'import torch_npu' '$tmp/npo/np_msft/p.py'"

# --target NAME: a folder dropped into a data folder's targets/ is a choice
PORTKIT_DATA_DIR="$tmp/data_all" "$PORTKIT" analyse -i "$project" -o "$tmp/n" --target xpu >/dev/null 2>&1; rc=$?
check "analyse --target xpu by name exits 0" "[ $rc = 0 ] && grep -rq 'use .xpu()' '$tmp/n'"
PORTKIT_DATA_DIR="$tmp/data_all" "$PORTKIT" analyse --help >"$tmp/help" 2>&1
check "analyse --help lists the targets" "grep -q 'cpu, npu, xpu (default npu)' '$tmp/help'"
PORTKIT_DATA_DIR="$tmp/data_all" "$PORTKIT" migrate -i "$project" -o "$tmp/t" --target tpu >/dev/null 2>"$tmp/t.err"; rc=$?
check "an unknown target exits 2 listing the available ones" "[ $rc = 2 ] && grep -q \"unknown target 'tpu'; available targets: cpu, npu, xpu\" '$tmp/t.err'"
"$PORTKIT" migrate -i "$project" -o "$tmp/c" --target cpu >/dev/null 2>"$tmp/c.err"; rc=$?
check "migrate --target cpu exits 2: nothing to migrate to" "[ $rc = 2 ] && grep -q 'targets for migrate: npu' '$tmp/c.err'"
mkdir -p "$tmp/broken" && echo '{"name": "broken", "device": "x"}' >"$tmp/broken/target.json"
"$PORTKIT" analyse -i "$project" -o "$tmp/b" --target "$tmp/broken" >/dev/null 2>"$tmp/b.err"; rc=$?
check "a bad target.json exits 2 naming the file and the key" "[ $rc = 2 ] && grep -q \"$tmp/broken/target.json: unknown key \\\"device\\\"\" '$tmp/b.err'"

# prof analyse: the advisor reads the default target's facts (xpu is the only one here)
mkdir -p "$tmp/p_npu" "$tmp/p_xpu"
cat >"$tmp/p_npu/trace.json" <<'JSON'
{"schemaVersion": 1, "traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::pow", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mean", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
 {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
 {"ph": "X", "cat": "cpu_op", "name": "aten::rsqrt", "pid": 1, "tid": 1, "ts": 30, "dur": 10},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 40, "dur": 10},
 {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 0, "dur": 40},
 {"ph": "X", "cat": "kernel", "name": "xccl_all_reduce_kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 40}
]}
JSON
cp "$tmp/p_npu/trace.json" "$tmp/p_xpu/"
for d in npu xpu; do "$PORTKIT" prof import -dir "$tmp/p_$d" >/dev/null 2>&1; done
"$PORTKIT" prof analyse -dir "$tmp/p_npu" >"$tmp/p_npu.out" 2>&1; rc1=$?
PORTKIT_DATA_DIR="$tmp/data_only" "$PORTKIT" prof analyse -dir "$tmp/p_xpu" >"$tmp/p_xpu.out" 2>&1; rc2=$?
check "prof analyse runs with either target" "[ $rc1 = 0 ] && [ $rc2 = 0 ]"
check "the advisor names the target's fused API" "grep -q 'replace it with torch_npu.npu_rms_norm' '$tmp/p_npu.out' && grep -q 'replace it with torch_xpu.fused_rms_norm' '$tmp/p_xpu.out'"
comm() { grep 'device communication' "$1" | tr -s ' |' ' '; }
check "xccl kernels count as communication only for xpu" "[ \"\$(comm '$tmp/p_npu.out')\" != \"\$(comm '$tmp/p_xpu.out')\" ] && comm '$tmp/p_npu.out' | grep -q ' 0\\.0%' && ! comm '$tmp/p_xpu.out' | grep -q ' 0\\.0%'"
echo "target: $pass passed, $fail failed"
[ $fail = 0 ]
