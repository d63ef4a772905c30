#!/usr/bin/env bash
# portkit prof on the command line: every JSON output loads with Python's json, the help lists
# every sub-command, importers are chosen by content, and a store from an older portkit is refused.
source "$(dirname "$0")/harness.sh"
traces=tests/data/traces
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

help=$("$PORTKIT" prof --help)
for sub in collect import export analyse diff query; do
  check "prof --help lists $sub" "grep -q '^  $sub ' <<<\"\$help\""
done
export_help=$("$PORTKIT" prof export --help)
check "prof export --help lists summary and timeline" \
  "grep -q '^  summary ' <<<\"\$export_help\" && grep -q '^  timeline ' <<<\"\$export_help\""
check "no seed wording in the prof help" "! \"$PORTKIT\" prof collect --help | grep -qi seed"

# Detection by content: a gzipped, renamed trace_view.json is a Ascend (ascend_pt) trace; a renamed
# kernel_details.csv is found by its header; a .json that is no trace is skipped with a note.
mkdir -p "$tmp/npu"
gzip -c "$traces/ascend/trace_view.json" > "$tmp/npu/device.trace.gz"
cp "$traces/ascend/kernel_details.csv" "$tmp/npu/tasks.txt"
echo '{"lr": 0.1}' > "$tmp/npu/config.json"
"$PORTKIT" prof import -dir "$tmp/npu" >"$tmp/npu.out" 2>"$tmp/npu.err"
check "import by content exits 0" "[ $? = 0 ]"
check "gzipped trace_view.json read as ascend_pt" "grep -Eq 'device\.trace\.gz +\| +ascend_pt +\|' '$tmp/npu.out'"
check "renamed kernel_details.csv read as kernel_details" "grep -Eq 'tasks\.txt +\| +ascend_pt kernel_details +\|' '$tmp/npu.out'"
check "a .json that is not a trace is skipped with a note" \
  "grep -q 'Skipped config.json: not a trace portkit reads' '$tmp/npu.err'"

# JSON outputs.
"$PORTKIT" prof export summary -dir "$tmp/npu" --format json >/dev/null 2>"$tmp/err"
check "export summary --format json exits 0" "[ $? = 0 ]"
for f in op_summary op_statistic api_statistic kernel_statistic step_trace; do
  check "summary/$f.json loads" "$py -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), list)' '$tmp/npu/summary/$f.json'"
done
# Ascend: msprof's op_statistic (op type and accelerator core from kernel_details.csv) and
# op_summary's formats and output shapes.
check "op_statistic: Ascend op types on their cores (MatMul on AI_CORE, HCCL broadcast)" \
  "$py -c '
import json,sys
rows={(r[\"OP Type\"], r[\"Core Type\"]): r for r in json.load(open(sys.argv[1]))}
assert rows[(\"MatMul\", \"AI_CORE\")][\"Count\"] == 9, rows.keys()
assert rows[(\"hcom_broadcast_\", \"HCCL\")][\"Count\"] == 2
assert (\"ZerosLike\", \"AI_VECTOR_CORE\") in rows
' '$tmp/npu/summary/op_statistic.json'"
check "op_summary: formats, output shapes and types of kernel_details rows" \
  "$py -c '
import json,sys
r=[r for r in json.load(open(sys.argv[1])) if r[\"Op Name\"]==\"MatMul91\"][0]
assert r[\"OP Type\"]==\"MatMul\" and r[\"Task Type\"]==\"AI_CORE\", r
assert r[\"Input Formats\"]==\"FORMAT_ND;FORMAT_ND\" and r[\"Output Shapes\"]==\"\\\"4096,4608\\\"\" and r[\"Output Data Types\"]==\"FLOAT16\" and r[\"Output Formats\"]==\"FORMAT_ND\", r
' '$tmp/npu/summary/op_summary.json'"
"$PORTKIT" prof analyse -dir "$tmp/npu" --format json >"$tmp/analyse.out" 2>"$tmp/err"
check "analyse --format json exits 0" "[ $? = 0 ]"
check "analysis/advisor.json loads and holds findings" \
  "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"findings\"] and d[\"profiled_ns\"] > 0' '$tmp/npu/analysis/advisor.json'"
check "only the formats asked for are written" "[ ! -e '$tmp/npu/analysis/advisor.html' ]"
mkdir -p "$tmp/base" "$tmp/cmp"
cp "$traces/kineto/trace_diff__control__control.json.gz" "$tmp/base/"
cp "$traces/kineto/trace_diff__test__test.json.gz" "$tmp/cmp/"
"$PORTKIT" prof diff "$tmp/base" "$tmp/cmp" --format json,csv --fail-above 10 >"$tmp/diff.out" 2>"$tmp/diff.err"
check "diff over the gate exits 3" "[ $? = 3 ]"
check "diff/diff.json loads and says it regressed" \
  "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"regressed\"] and d[\"base\"][\"steps\"] == 6 and d[\"operators\"]' '$tmp/cmp/diff/diff.json'"
check "diff CSVs written too" "[ -s '$tmp/cmp/diff/diff_operators.csv' ] && [ -s '$tmp/cmp/diff/diff_kernels.csv' ]"

# prof query: every table as JSON loads; ops are host_op_summary's rows in ns; the events it
# streams are the trace's device tasks as task_time counts them; steps and comm of the Ascend trace.
for t in events ops steps comm; do
  "$PORTKIT" prof query "$tmp/npu" --table $t --format json >"$tmp/q_$t.json" 2>"$tmp/err"
  check "prof query --table $t --format json exits 0 and loads" \
    "[ $? = 0 ] && $py -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), list)' '$tmp/q_$t.json'"
done
cat >"$tmp/query_check.py" <<'EOF_PY'
import csv, json, sys
folder, tmp = sys.argv[1], sys.argv[2]
ops = json.load(open(tmp + "/q_ops.json"))
host = json.load(open(folder + "/summary/host_op_summary.json"))
assert len(ops) == len(host) > 0, (len(ops), len(host))
for q, h in zip(ops, host):
    assert (q["name"], q["input_dims"], q["count"]) == (h["Name"], h["Input Shapes"], h["Count"]), (q, h)
    assert "%d.%03d" % divmod(q["self_ns"], 1000) == "%.3f" % h["Self Time(us)"], (q, h)
events = json.load(open(tmp + "/q_events.json"))
tasks = json.load(open(folder + "/summary/task_time.json"))
device = [e for e in events if e["kind"] in ("kernel", "gpu_memcpy", "gpu_memset")]
assert len(device) == len(tasks) > 0, (len(device), len(tasks))
comm = json.load(open(tmp + "/q_comm.json"))
assert comm and all(c["name"].startswith("hcom_") for c in comm), comm[:3]
with open(tmp + "/q_kernels.csv", newline="") as f:
    rows = list(csv.DictReader(f))
assert len(rows) == 5 and all(r["kind"] == "kernel" and "hcom_" in r["name"] for r in rows), rows
EOF_PY
"$PORTKIT" prof query -dir "$tmp/npu" --table events --kind kernel --name-regex '^hcom_' --limit 5 \
  >"$tmp/q_kernels.csv" 2>"$tmp/err"
check "prof query agrees with export summary (ops, device tasks, comm; --kind, --name-regex, --limit)" \
  "$py '$tmp/query_check.py' '$tmp/npu' '$tmp'"

# A store without a schema version (as portkit wrote before versions existed) is refused.
mkdir -p "$tmp/old"
cp "$traces/ascend/kernel_details.csv" "$tmp/old/"
$py -c 'import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute("CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT)"); db.commit()' "$tmp/old/portkit.db"
"$PORTKIT" prof analyse -dir "$tmp/old" >/dev/null 2>"$tmp/old.err"
check "an old store is refused with exit 2" "[ $? = 2 ]"
check "the message says to import again" "grep -q 'without a schema version.*run .portkit prof import. on the traces again' '$tmp/old.err'"
"$PORTKIT" prof import -dir "$tmp/old" >/dev/null 2>"$tmp/old.err"
check "import into an old store is refused too" "[ $? = 2 ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
