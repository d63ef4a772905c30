#!/usr/bin/env bash
# portkit prof cluster on the command line, over real Kineto traces (tests/data/traces/kineto, from
# HTA's tests): ranks aligned on absolute time, every output loads and holds what the traces hold,
# the merged timeline has one process per rank in time order, and bad folders give clear errors.
source "$(dirname "$0")/harness.sh"
k=tests/data/traces/kineto
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

check "prof --help lists cluster" "\"$PORTKIT\" prof --help | grep -q '^  cluster '"

mkdir -p "$tmp/pair"
cp "$k/timeline_analysis__sampled_rank-0.json.gz" "$k/trace_filter__sampled_rank-1.json.gz" "$tmp/pair/"
echo '{"lr": 0.1}' > "$tmp/pair/config.json"
"$PORTKIT" prof cluster -dir "$tmp/pair" >"$tmp/pair.out" 2>"$tmp/pair.err"
check "cluster exits 0" "[ $? = 0 ]"
out="$tmp/pair/cluster_analysis_output"
for f in cluster_report.txt cluster_report.json cluster_report.html cluster_step_trace_time.csv \
         cluster_communication.json cluster_communication_matrix.json cluster_timeline.json; do
  check "writes $f" "[ -s '$out/$f' ]"
done
check "a .json that is no trace is skipped with a note" "grep -q 'skipped config.json: not a Kineto, legacy torch or torch_npu trace' '$tmp/pair.err'"
check "text report names both ranks and the slow-rank rule" \
  "grep -q 'Cluster of 2 rank(s)' '$tmp/pair.out' && grep -q '(max-min)/mean > 0.05' '$tmp/pair.out'"
# Absolute time: rank 1's first event is 553 us after rank 0's (1682725897227300 vs ...226747 us).
check "rank 1 starts 553 us after rank 0" \
  "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); r={x[\"rank\"]: x for x in d[\"ranks\"]}; assert r[0][\"offset_us\"] == 0 and r[1][\"offset_us\"] == 553.0, r' '$out/cluster_report.json'"
# Per-rank breakdown adds up: idle + compute + non-compute = device span; overlap <= communication.
check "breakdown adds up on every rank" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1]))
assert len(d[\"temporal_breakdown\"]) == 2
for b in d[\"temporal_breakdown\"]:
    t=b[\"total\"]
    assert abs(t[\"idle_us\"]+t[\"compute_us\"]+t[\"non_compute_us\"]-t[\"window_us\"]) < 1e-6, t
    assert 0 < t[\"overlapped_us\"] <= t[\"communication_us\"] and t[\"compute_us\"] > 0, t
    assert abs(t[\"exposed_communication_us\"] + t[\"overlapped_us\"] - t[\"communication_us\"]) < 1e-6
' '$out/cluster_report.json'"
# Slow rank: step 551's compute differs by far more than 5 % between the two ranks.
check "slow-rank check flags step 551 compute and names the rank with most compute" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1]))
c=[x for x in d[\"slow_rank_checks\"] if x[\"step\"]==551 and x[\"quantity\"]==\"compute\"][0]
b={x[\"rank\"]: x for x in d[\"temporal_breakdown\"]}
s={r: [s for s in b[r][\"steps\"] if s[\"step\"]==551][0][\"split\"][\"compute_us\"] for r in b}
assert c[\"slow\"] and c[\"rank\"] == max(s, key=s.get), (c, s)
assert abs(c[\"ratio\"] - (max(s.values())-min(s.values()))/(sum(s.values())/2)) < 1e-5
' '$out/cluster_report.json'"
check "step trace csv has msprof-analyze's columns and a row per step and rank" \
  "head -1 '$out/cluster_step_trace_time.csv' | grep -q '^Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing' && [ \$(grep -c '^551,rank,' '$out/cluster_step_trace_time.csv') = 2 ]"
check "communication: 5 SendRecv collectives matched on both ranks, wait on one side only" \
  "$py -c '
import json,sys
c=json.load(open(sys.argv[1]))
assert len(c) == 5 and all(x[\"op\"] == \"SendRecv\" and len(x[\"ranks\"]) == 2 for x in c), c
for x in c:
    assert min(r[\"wait_us\"] for r in x[\"ranks\"]) == 0
    for r in x[\"ranks\"]: assert abs(r[\"wait_us\"] + r[\"transit_us\"] - r[\"elapse_us\"]) < 1e-6 or r[\"transit_us\"] == 0
' '$out/cluster_communication.json'"
check "communication matrix holds the 0-1 and 1-0 links" \
  "$py -c 'import json,sys; m=json.load(open(sys.argv[1])); assert set(m[\"SendRecv\"]) == {\"0-1\", \"1-0\"}, m' '$out/cluster_communication_matrix.json'"
check "merged timeline: one process per rank, named, events sorted by time, rank 1 shifted by its offset" \
  "$py -c '
import json,sys,gzip
t=json.load(open(sys.argv[1]))
ev=t[\"traceEvents\"]
names={e[\"pid\"]: e[\"args\"][\"name\"] for e in ev if e.get(\"ph\")==\"M\" and e[\"name\"]==\"process_name\"}
assert names == {0: \"rank 0\", 1: \"rank 1\"}, names
timed=[e for e in ev if e.get(\"ph\")!=\"M\"]
ts=[float(e[\"ts\"]) for e in timed]
assert ts == sorted(ts) and ts[0] == 0.0
src=json.load(gzip.open(sys.argv[2]))[\"traceEvents\"]
n_src=sum(1 for e in src if e.get(\"ph\")!=\"M\" and \"ts\" in e)
assert sum(1 for e in timed if e[\"pid\"]==1) == n_src, n_src
step=[e for e in timed if e[\"pid\"]==1 and e.get(\"name\")==\"ProfilerStep#551\"][0]
assert abs(step[\"ts\"] - (1682725898079484-1682725897226747)) < 1e-6, step
' '$out/cluster_timeline.json' '$tmp/pair/trace_filter__sampled_rank-1.json.gz'"
check "html report has the breakdown and slow-rank tables" \
  "grep -q 'Temporal breakdown' '$out/cluster_report.html' && grep -q 'class=\"slow\"' '$out/cluster_report.html'"
# A second run: the output folder inside the input is not read as a rank; output is deterministic.
cp "$out/cluster_report.json" "$tmp/first.json"
"$PORTKIT" prof cluster -dir "$tmp/pair" >/dev/null 2>&1
check "a second run gives the same report (its own output is not a rank)" "cmp -s '$tmp/first.json' '$out/cluster_report.json'"
"$PORTKIT" prof cluster -dir "$tmp/pair" -o "$tmp/custom" --format json --no-timeline >/dev/null 2>&1
check "-o and --format json --no-timeline" "[ -s '$tmp/custom/cluster_report.json' ] && [ ! -e '$tmp/custom/cluster_timeline.json' ] && [ ! -e '$tmp/custom/cluster_report.html' ]"

# Errors.
mkdir -p "$tmp/empty"
echo 'not a trace' > "$tmp/empty/notes.txt"
"$PORTKIT" prof cluster -dir "$tmp/empty" >/dev/null 2>"$tmp/err"
rc=$?
check "a folder with no rank exits 2 and says so" "[ $rc = 2 ] && grep -q 'no Kineto trace found' '$tmp/err'"
"$PORTKIT" prof cluster -dir "$tmp/missing" >/dev/null 2>"$tmp/err"
check "a missing folder exits 2" "[ $? = 2 ]"
mkdir -p "$tmp/dup"
cp "$k/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz" \
   "$k/cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz" "$tmp/dup/"
"$PORTKIT" prof cluster -dir "$tmp/dup" >/dev/null 2>"$tmp/err"
rc=$?
check "two traces of rank 0 exit 2 naming both files" \
  "[ $rc = 2 ] && grep -q 'rank 0 appears twice: critical_path__alexnet' '$tmp/err' && grep -q 'cupti_profiler__benchmark' '$tmp/err'"
mkdir -p "$tmp/norank"
cp "$k/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz" "$tmp/norank/"
"$PORTKIT" prof cluster -dir "$tmp/norank" >/dev/null 2>"$tmp/err"
rc=$?
check "no distributedInfo and no rank in the name: rank 0, with a note (as HTA)" \
  "[ $rc = 0 ] && grep -q 'note: rank 0: no rank in the trace nor in its file name: taken as rank 0' '$tmp/norank/cluster_analysis_output/cluster_report.txt'"
rm -rf "$tmp/norank/cluster_analysis_output"
cp "$k/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz" "$tmp/norank/job_rank-5.json.gz"
rm "$tmp/norank/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
"$PORTKIT" prof cluster -dir "$tmp/norank" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "no distributedInfo: rank taken from the file name, with a note" \
  "[ $rc = 0 ] && grep -q 'rank 5: no distributedInfo.rank: rank taken from the file name' '$tmp/out'"
head -c 30000 <(gzip -dc "$k/trace_filter__sampled_rank-1.json.gz") > "$tmp/pair/trace_filter__sampled_rank-1.json"
"$PORTKIT" prof cluster -dir "$tmp/pair" >/dev/null 2>"$tmp/err"
rc=$?
check "a truncated copy of rank 1 beside the original is a duplicate rank" "[ $rc = 2 ] && grep -q 'rank 1 appears twice' '$tmp/err'"

mkdir -p "$tmp/far"
printf '{"distributedInfo": {"rank": 1}, "traceEvents": [{"ph":"X","name":"k","ts":3999999999999999,"dur":2,"args":{"stream":7}}], "baseTimeNanoseconds": 3999999999999999999}' > "$tmp/far/r.json"
"$PORTKIT" prof cluster -dir "$tmp/far" >/dev/null 2>"$tmp/err"
rc=$?
check "absolute times past the range: exit 2 naming the file" "[ $rc = 2 ] && grep -q 'r.json: absolute timestamps (baseTimeNanoseconds + ts) beyond the year 2096' '$tmp/err'"

# torch_npu's layout: <name>_ascend_pt/{profiler_info_<rank>.json, ASCEND_PROFILER_OUTPUT/trace_view.json}.
for r in 0 1; do
  d="$tmp/npu/node_${r}_ascend_pt"
  mkdir -p "$d/ASCEND_PROFILER_OUTPUT"
  echo "{\"rank_id\": $r}" > "$d/profiler_info_$r.json"
  cp tests/data/traces/ascend/trace_view.json tests/data/traces/ascend/kernel_details.csv "$d/ASCEND_PROFILER_OUTPUT/"
done
"$PORTKIT" prof cluster -dir "$tmp/npu" --format json >"$tmp/npu.out" 2>"$tmp/npu.err"
check "torch_npu layout: two ranks from profiler_info_N.json" \
  "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [r[\"rank\"] for r in d[\"ranks\"]] == [0, 1] and d[\"ranks\"][1][\"device_tasks\"] == 276, d[\"ranks\"]' '$tmp/npu/cluster_analysis_output/cluster_report.json'"
# torch_npu's own Overlap Analysis process in the same trace_view.json says how long the device
# computed and was free; portkit's compute and idle from the Ascend Hardware tasks agree within 1 %.
check "torch_npu layout: compute and idle agree with the trace's Overlap Analysis within 1 %" \
  "$py -c '
import json,sys
t=json.load(open(sys.argv[2]))
pid=[e[\"pid\"] for e in t if e.get(\"ph\")==\"M\" and e.get(\"name\")==\"process_name\" and e[\"args\"][\"name\"]==\"Overlap Analysis\"][0]
ov={}
for e in t:
    if e.get(\"ph\")==\"X\" and e[\"pid\"]==pid: ov[e[\"name\"]]=ov.get(e[\"name\"],0)+float(e[\"dur\"])
b=json.load(open(sys.argv[1]))[\"temporal_breakdown\"][0][\"total\"]
assert abs(b[\"compute_us\"]-ov[\"Computing\"]) <= 0.01*ov[\"Computing\"], (b, ov)
assert abs(b[\"free_us\"]-ov[\"Free\"]) <= 0.01*ov[\"Free\"], (b, ov)
' '$tmp/npu/cluster_analysis_output/cluster_report.json' tests/data/traces/ascend/trace_view.json"

# ---- own outputs: prof import after prof cluster on the same folder gives the same store ------
dump() {  # the store's content, sorted; ids and rowids (new on every import) as what they name
  $py -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = {
    "strings": "SELECT value FROM strings",
    "traces": "SELECT path, format, events, skipped, warning, marks, base_ns FROM traces",
    "devices": "SELECT t.path, d.id, d.name, d.properties FROM devices d JOIN traces t ON t.id = d.trace",
    "marks": "SELECT t.path, m.ph, m.ts, m.pid, m.tid, m.event FROM marks m JOIN traces t ON t.id = m.trace",
    "events": "SELECT t.path, e.kind, n.value, c.value, e.ts, e.dur, e.pid, e.tid, e.correlation, e.external_id, "
              "e.input_dims, e.input_types, e.args, p.ts, l.ts FROM events e JOIN traces t ON t.id = e.trace "
              "JOIN strings n ON n.id = e.name LEFT JOIN strings c ON c.id = e.category "
              "LEFT JOIN events p ON p.rowid = e.parent LEFT JOIN events l ON l.rowid = e.launch",
}
for t, sql in q.items():
    for row in sorted(map(repr, db.execute(sql))): print(t, row)' "$1/portkit.db"
}
mkdir -p "$tmp/own"
cp "$k/timeline_analysis__sampled_rank-0.json.gz" "$k/trace_filter__sampled_rank-1.json.gz" "$tmp/own/"
"$PORTKIT" prof import -dir "$tmp/own" >/dev/null 2>&1
dump "$tmp/own" > "$tmp/own_before.txt"
"$PORTKIT" prof cluster -dir "$tmp/own" >/dev/null 2>&1
"$PORTKIT" prof export timeline -dir "$tmp/own" -o "$tmp/own/aligned.json" >/dev/null 2>&1
mkdir -p "$tmp/own/elsewhere" && cp "$tmp/own/cluster_analysis_output/cluster_timeline.json" "$tmp/own/elsewhere/merged.json"
"$PORTKIT" prof import -dir "$tmp/own" >/dev/null 2>"$tmp/own.err"
dump "$tmp/own" > "$tmp/own_after.txt"
check "import after cluster and export: the same store as before" "cmp -s '$tmp/own_before.txt' '$tmp/own_after.txt'"
check "import says what it skipped as portkit's own output" \
  "grep -q 'Skipped cluster_analysis_output/: portkit.s own output' '$tmp/own.err' && grep -q 'Skipped aligned.json: portkit.s own output' '$tmp/own.err' && grep -q 'Skipped elsewhere/merged.json: portkit.s own output (a merged timeline written by prof cluster)' '$tmp/own.err'"
"$PORTKIT" prof cluster -dir "$tmp/own" --format json >/dev/null 2>"$tmp/own_cluster.err"
check "cluster does not read an exported timeline as a rank" \
  "[ $? = 0 ] && grep -q 'skipped aligned.json: portkit.s own output' '$tmp/own_cluster.err'"

# ---- export timeline over a folder of ranks: every rank on absolute time ----------------------
check "export timeline of two ranks: the ranks' steps 551 as far apart as on absolute time" \
  "$py -c '
import gzip,json,sys
t=json.load(open(sys.argv[1]))[\"traceEvents\"]
names={e[\"pid\"]: e[\"args\"][\"name\"] for e in t if e.get(\"ph\")==\"M\" and e[\"name\"]==\"process_name\"}
def step(events, pick): return [e for e in events if e.get(\"name\")==\"ProfilerStep#551\" and pick(e)][0]
r0=float(step(t, lambda e: \"sampled_rank-0\" in names[e[\"pid\"]])[\"ts\"])
r1=float(step(t, lambda e: \"sampled_rank-1\" in names[e[\"pid\"]])[\"ts\"])
def absolute(path):  # baseTimeNanoseconds + ts, in us (ts alone when there is no base)
    d=json.load(gzip.open(path)); return d.get(\"baseTimeNanoseconds\", 0)/1000 + float(step(d[\"traceEvents\"], lambda e: True)[\"ts\"])
a0=absolute(sys.argv[2]); a1=absolute(sys.argv[3])
assert abs((r1 - r0) - (a1 - a0)) < 1e-6 and abs(a1 - a0) > 100, (r0, r1, a0, a1)
' '$tmp/own/aligned.json' '$k/timeline_analysis__sampled_rank-0.json.gz' '$k/trace_filter__sampled_rank-1.json.gz'"

# ---- trace eras --------------------------------------------------------------------------------
g=tests/data/traces/gloo
# torch 2.8, 4 gloo ranks on CPU: no device task, explained.
mkdir -p "$tmp/gloo28" && cp "$g"/torch2.8_4ranks/*.gz "$tmp/gloo28/"
"$PORTKIT" prof cluster -dir "$tmp/gloo28" >"$tmp/gloo28.out" 2>&1
check "CPU-only 4-rank run: 4 ranks, gloo, and the report says why the device split is empty" \
  "[ $? = 0 ] && grep -q 'Cluster of 4 rank(s)' '$tmp/gloo28.out' && grep -q 'gloo' '$tmp/gloo28.out' && grep -q 'note: No rank has device tasks' '$tmp/gloo28.out'"
# An empty rank file and a broken one beside them: skipped with a note, the others analysed.
: > "$tmp/gloo28/rank4.pt.trace.json"
printf '{"traceEvents": [{"ph": "X", "na' > "$tmp/gloo28/rank5.pt.trace.json"
"$PORTKIT" prof cluster -dir "$tmp/gloo28" >"$tmp/gloo28b.out" 2>&1
check "empty and broken rank files are skipped with a note, never aborting" \
  "[ $? = 0 ] && grep -q 'Cluster of 4 rank(s)' '$tmp/gloo28b.out' && grep -q 'note: skipped rank4.pt.trace.json: not read' '$tmp/gloo28b.out' && grep -q 'note: skipped rank5.pt.trace.json: not read' '$tmp/gloo28b.out'"
rm "$tmp/gloo28/rank4.pt.trace.json" "$tmp/gloo28/rank5.pt.trace.json"
# A rank at or above the world size is noted.
$py -c '
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1])); d["distributedInfo"]["rank"] = 7
json.dump(d, gzip.open(sys.argv[2], "wt"))' "$g/torch2.8_4ranks/rank3.pt.trace.json.gz" "$tmp/gloo28/rank3.pt.trace.json.gz"
"$PORTKIT" prof cluster -dir "$tmp/gloo28" >"$tmp/gloo28c.out" 2>&1
check "rank 7 of a world of 4 is noted" "grep -q 'note: rank 7: rank 7 is not below the world size 4' '$tmp/gloo28c.out'"
# torch 1.13 without Kineto: the legacy profiler's per-rank traces (event arrays), accepted.
mkdir -p "$tmp/gloo113" && cp "$g"/torch1.13_2ranks/*.gz "$tmp/gloo113/"
"$PORTKIT" prof cluster -dir "$tmp/gloo113" --format text,json >"$tmp/gloo113.out" 2>&1
check "torch 1.13 legacy per-rank traces: 2 ranks from the file names, 4 steps each, clocks noted" \
  "[ $? = 0 ] && grep -q 'Cluster of 2 rank(s)' '$tmp/gloo113.out' && grep -q 'legacy profiler trace' '$tmp/gloo113.out' && [ \$(grep -c '^[0-9],rank,' '$tmp/gloo113/cluster_analysis_output/cluster_step_trace_time.csv') = 0 ]"
# PyTorch 1.8-1.9 categories (ProfilerStep as cat Operator, Kernel, Runtime): steps kept, same
# breakdown as the same traces in today's categories.
mkdir -p "$tmp/pt19"
for f in timeline_analysis__sampled_rank-0 trace_filter__sampled_rank-1; do
  $py -c '
import gzip, json, sys
old = {"cpu_op": "Operator", "kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}
d = json.load(gzip.open(sys.argv[1]))
for e in d["traceEvents"]:
    if e.get("cat") in old: e["cat"] = old[e["cat"]]
    if str(e.get("name", "")).startswith("ProfilerStep#"): e["cat"] = "Operator"
json.dump(d, gzip.open(sys.argv[2], "wt"))' "$k/$f.json.gz" "$tmp/pt19/$f.json.gz"
done
"$PORTKIT" prof cluster -dir "$tmp/pt19" --format json --no-timeline >/dev/null 2>&1
check "PyTorch 1.8-1.9 categories: the same steps and breakdown as today's" \
  "$py -c '
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert a[\"temporal_breakdown\"] == b[\"temporal_breakdown\"] and len(a[\"temporal_breakdown\"][0][\"steps\"]) > 0
' '$tmp/pt19/cluster_analysis_output/cluster_report.json' '$tmp/own/cluster_analysis_output/cluster_report.json'"
# Triton: the launcher (a cpu_op with a stream field, 95.8 us) is not device time; the kernel is.
mkdir -p "$tmp/triton" && cp "$k/triton_example__triton_example.json.gz" "$tmp/triton/"
"$PORTKIT" prof cluster -dir "$tmp/triton" --format text,json --no-timeline >"$tmp/triton.out" 2>&1
check "Triton launcher with a stream field is not device compute" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1])); t=d[\"temporal_breakdown\"][0][\"total\"]
assert d[\"ranks\"][0][\"device_tasks\"] == 1 and t[\"compute_us\"] < 2, (d[\"ranks\"], t)
' '$tmp/triton/cluster_analysis_output/cluster_report.json' && grep -q '1 host event(s) with a stream field' '$tmp/triton.out'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
