#!/usr/bin/env bash
# `prof diff --fail-above` on committed real traces (tests/data/traces/diff_gate, recorded by
# tests/data/traces/scripts/record_diff_gate_traces.py on torch 2.8 at load 16 on 2 cores: a small
# CNN, 60 measured steps a run). The figures asserted are those of the committed files.
#   again/busy: identical work, `busy` with a process spinning on its core: its mean step is +83 %,
#     its step work -2 %: the significant gate passes, the point rule trips.
#   same/again: identical work, consecutive runs: an interval that holds 0 and +5 % (inconclusive).
#   again/slow2: real extra work (4 more convolutions a step): regressed.
source "$(dirname "$0")/harness.sh"
traces=tests/data/traces/diff_gate
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
for side in base same again busy slow slow2; do
  mkdir -p "$tmp/$side" && cp "$traces/$side/worker.pt.trace.json.gz" "$tmp/$side/"
done
gate_line() { grep '^gate (' "$1"; }

"$PORTKIT" prof diff "$tmp/again" "$tmp/busy" --fail-above 5 --format csv,json >"$tmp/busy.out" 2>"$tmp/busy.err"
check "identical work on a busy core: the gate passes (exit 0)" "[ $? = 0 ]"
check "the text gives the step work change with its interval and the verdict" \
  "gate_line '$tmp/busy.out' | grep -qxF 'gate (significant, --fail-above 5.00%, step work): pass: step work time changed by -1.99% (95% interval [-3.44%, +0.42%]): not a significant slowdown beyond --fail-above 5.00%'"
check "the mean step grew by more than 80 % (preemption), the step work line says -1.99 %" \
  "grep -Eq '^step time: [0-9.]+ ms \(61 steps\) -> [0-9.]+ ms \(61 steps\): \+8[0-9]\.[0-9]{2}%$' '$tmp/busy.out' && grep -q '^step work: .*: -1.99%, 95% interval' '$tmp/busy.out'"
check "diff.json: verdict, statistic, limit, step work on each side" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1]))
assert d[\"gate\"]==\"significant\" and d[\"gate_statistic\"]==\"step_work\" and d[\"verdict\"]==\"pass\", d
assert not d[\"regressed\"] and d[\"fail_above\"]==5 and d[\"min_steps\"]==5 and d[\"base\"][\"steps\"]==61, d
w=d[\"work_change\"]; assert (w[\"percent\"], w[\"low\"], w[\"high\"])==(-1.9945, -3.4395, 0.4229), w
assert d[\"base\"][\"work_ms\"] < d[\"base\"][\"step_median_ms\"] and d[\"step_change_percent\"] > 80, d
' '$tmp/busy/diff/diff.json'"
"$PORTKIT" prof diff "$tmp/again" "$tmp/busy" --fail-above 5 --gate point -o "$tmp/point" >"$tmp/point.out" 2>"$tmp/point.err"
check "the point rule (no noise model) trips on the same pair (exit 3)" "[ $? = 3 ]"
check "its message names the mean step change" \
  "grep -Eq 'regressed: the mean step time changed by \+8[0-9]\.[0-9]{2}% \(--gate point: no noise model\), more than --fail-above 5.00%' '$tmp/point.err'"

"$PORTKIT" prof diff "$tmp/same" "$tmp/again" --fail-above 5 --format json >"$tmp/same.out" 2>"$tmp/same.err"
check "consecutive identical runs whose interval holds both 0 and +5 %: inconclusive (exit 5)" "[ $? = 5 ]"
check "the inconclusive message says why and what to do" \
  "grep -qF 'inconclusive: step work time changed by +4.38% (95% interval [-0.70%, +6.25%]): the interval holds both no change and a change above --fail-above 5.00%; too noisy to decide: profile more steps, or give more runs a side (--base-run, --compare-run)' '$tmp/same.err'"
check "diff.json says inconclusive, not regressed" \
  "$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"verdict\"]==\"inconclusive\" and not d[\"regressed\"], d' '$tmp/again/diff/diff.json'"

"$PORTKIT" prof diff "$tmp/again" "$tmp/slow2" --fail-above 5 --format json >"$tmp/slow.out" 2>"$tmp/slow.err"
check "real extra work trips the gate (exit 3)" "[ $? = 3 ]"
check "the message gives the change, its interval and the rule" \
  "grep -qF 'regressed: step work time changed by +22.09% (95% interval [+20.28%, +24.63%]): above --fail-above 5.00%, and the interval is all above 0' '$tmp/slow.err'"
"$PORTKIT" prof diff "$tmp/again" "$tmp/slow2" --fail-above 5 --gate interval -o "$tmp/strict" >/dev/null 2>"$tmp/strict.err"
check "--gate interval trips too: even the lower bound is above the limit" \
  "[ $? = 3 ] && grep -qF ': even its lower bound is above --fail-above 5.00%' '$tmp/strict.err'"
"$PORTKIT" prof diff "$tmp/again" "$tmp/slow2" --fail-above 5 --min-steps 100 -o "$tmp/few" >/dev/null 2>"$tmp/few.err"
check "fewer steps than --min-steps: inconclusive (exit 5), whatever the change" \
  "[ $? = 5 ] && grep -qF 'inconclusive: only 61 measured steps on a side (--min-steps 100): too few to tell a slowdown from noise; profile more steps, or give --gate point to compare the mean step times' '$tmp/few.err'"
"$PORTKIT" prof diff "$tmp/again" "$tmp/slow2" -o "$tmp/nogate" >"$tmp/nogate.out" 2>&1
check "without --fail-above: exit 0 and no gate line" "[ $? = 0 ] && ! grep -q '^gate (' '$tmp/nogate.out'"

# Several runs a side: runs are resampled, then steps.
"$PORTKIT" prof diff "$tmp/again" "$tmp/slow" --base-run "$tmp/busy" --compare-run "$tmp/slow2" --fail-above 5 \
  --format json -o "$tmp/runs" >"$tmp/runs.out" 2>"$tmp/runs.err"
check "two runs a side, extra work: trips (exit 3)" "[ $? = 3 ]"
check "two runs a side: 122 steps and 2 runs each in diff.json" \
  "$py -c '
import json,sys
d=json.load(open(sys.argv[1])); assert d[\"base\"][\"runs\"]==2 and d[\"base\"][\"steps\"]==122 and d[\"compare\"][\"steps\"]==122, d[\"base\"]
' '$tmp/runs/diff.json'"
"$PORTKIT" prof diff --base-run "$tmp/busy" --compare-run "$tmp/slow2" "$tmp/again" "$tmp/slow" --fail-above 5 \
  --format json -o "$tmp/runs2" >/dev/null 2>&1
check "the same input (run options first) gives the same diff.json byte for byte (seeded bootstrap)" \
  "cmp -s '$tmp/runs/diff.json' '$tmp/runs2/diff.json'"
"$PORTKIT" prof diff "$tmp/base" "$tmp/same" --base-run "$tmp/missing" >/dev/null 2>"$tmp/missing.err"
check "a missing --base-run is a usage error (exit 2)" "[ $? = 2 ]"
"$PORTKIT" prof diff "$tmp/base" "$tmp/same" --gate nosuchgate >/dev/null 2>&1
check "an unknown --gate is a usage error (exit 2)" "[ $? = 2 ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
