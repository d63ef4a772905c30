#!/usr/bin/env bash
# `prof diff --fail-above` on committed small traces (tests/data/traces/diff_gate, made by
# scripts/make_diff_gate_traces.py): steps with machine-like noise. Identical runs do not trip the
# noise-aware gate (though the old point rule does); a real +12 % slowdown trips it; several runs
# a side are pooled; the intervals are reproducible.
source "$(dirname "$0")/harness.sh"
traces=tests/data/traces/diff_gate
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
for side in base same slow; do mkdir -p "$tmp/$side" && cp "$traces/$side/worker.pt.trace.json" "$tmp/$side/"; done

"$PORTKIT" prof diff "$tmp/base" "$tmp/same" --fail-above 5 --format csv,json >"$tmp/same.out" 2>"$tmp/same.err"
check "identical runs: the interval gate does not trip (exit 0)" "[ $? = 0 ]"
check "the text gives the median step change with its 95 % interval" \
  "grep -Eq '^median step: [0-9.]+ ms \(1 run\) -> [0-9.]+ ms \(1 run\): [-+][0-9.]+%, 95% interval \[[-+][0-9.]+%, [-+][0-9.]+%\]$' '$tmp/same.out'"
check "the operator table has an interval column" "grep -q '95% interval/step' '$tmp/same.out'"
check "diff.json: interval gate, 30 steps a side, interval around 0, not regressed" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1]))
assert d[\"gate\"]==\"interval\" and not d[\"regressed\"] and d[\"base\"][\"steps\"]==30 and d[\"base\"][\"runs\"]==1, d
c=d[\"step_change\"]; assert c[\"low\"] < 0 < c[\"high\"] and d[\"resamples\"]==2000, c
ops={o[\"name\"]: o for o in d[\"operators\"]}; assert ops[\"aten::conv2d\"][\"step_change\"][\"low\"] < 0, ops
' '$tmp/same/diff/diff.json'"
check "the CSV keeps its first five columns and adds the per-step ones" \
  "head -1 '$tmp/same/diff/diff_operators.csv' | grep -qx 'Name,Base Time(ms),Compare Time(ms),Delta(ms),Delta(%),Base Step Median(ms),Compare Step Median(ms),Step Change(%),Step Change Low(%),Step Change High(%)'"

"$PORTKIT" prof diff "$tmp/base" "$tmp/same" --fail-above 5 --gate point -o "$tmp/point" >"$tmp/point.out" 2>"$tmp/point.err"
check "the old rule (--gate point) trips on the same identical pair from noise alone (exit 3)" "[ $? = 3 ]"
check "its message names the mean step change" "grep -q 'step time regressed by +[0-9.]*%, more than --fail-above 5.00%' '$tmp/point.err'"

"$PORTKIT" prof diff "$tmp/base" "$tmp/slow" --fail-above 5 --format json >"$tmp/slow.out" 2>"$tmp/slow.err"
check "a real +12 % slowdown trips the interval gate (exit 3)" "[ $? = 3 ]"
check "the message gives the change, its interval and the gate" \
  "grep -Eq 'median step time regressed by \+[0-9.]+% \(95% interval \[\+[0-9.]+%, \+[0-9.]+%\]\): even its lower bound is above --fail-above 5.00%' '$tmp/slow.err'"
check "the slowed operator's interval is all above 0" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1])); ops={o[\"name\"]: o for o in d[\"operators\"]}
assert ops[\"aten::conv2d\"][\"step_change\"][\"low\"] > 5 and ops[\"aten::relu\"][\"step_change\"][\"low\"] < 0, ops
' '$tmp/slow/diff/diff.json'"

# Several runs a side: base + same against slow + slow again (the same folder twice is two runs).
"$PORTKIT" prof diff "$tmp/base" "$tmp/slow" --base-run "$tmp/same" --compare-run "$tmp/slow" --fail-above 5 \
  --format json -o "$tmp/runs" >"$tmp/runs.out" 2>"$tmp/runs.err"
check "two runs a side: still trips (exit 3)" "[ $? = 3 ]"
check "two runs a side: 60 steps and 2 runs each in diff.json" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1])); assert d[\"base\"][\"runs\"]==2 and d[\"base\"][\"steps\"]==60 and d[\"compare\"][\"steps\"]==60, d[\"base\"]
' '$tmp/runs/diff.json'"
"$PORTKIT" prof diff --base-run "$tmp/same" --compare-run "$tmp/slow" "$tmp/base" "$tmp/slow" --fail-above 5 \
  --format json -o "$tmp/runs2" >/dev/null 2>&1
check "the same input (run options before the folders) gives the same diff.json byte for byte (seeded bootstrap)" "cmp -s '$tmp/runs/diff.json' '$tmp/runs2/diff.json'"
"$PORTKIT" prof diff "$tmp/base" "$tmp/same" --base-run "$tmp/missing" >/dev/null 2>"$tmp/missing.err"
check "a missing --base-run is a usage error (exit 2)" "[ $? = 2 ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
