#!/usr/bin/env bash
# bench/real_code/score.py on the self-test corpus tests/fixtures/realcode (a tiny script and a
# one-op extension written for this test): precision, recall and migrate coverage are computed from
# the labels, a bad label file is refused with its name and line, and without corpora the real-code
# run skips with 77. The real-code run itself is the ctest entry realcode_corpora.
source "$(dirname "$0")/harness.sh"

score=bench/real_code/score.py
fix=tests/fixtures/realcode

python3 "$score" --portkit "$PORTKIT" --corpora "$fix" --labels-dir "$fix/labels" --work "$tmp/w" \
  >"$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
check "score.py on the self-test corpus exits 0" "[ $rc = 0 ]"
check "cuda recall over the listed lines is 4/4" "grep -qE '^    recall +100\.0 % \(4/4\)' '$tmp/out'"
check "the comment line is not reported (cuda precision 4/4)" "grep -qE '^    precision +100\.0 % \(4/4\)' '$tmp/out'"
check "the custom op call is found" "grep -A2 '^  custom_op' '$tmp/out' | grep -qE 'recall +100\.0 % \(1/1\)'"
check "migrate covers the three labelled edits" "grep -qE 'migrate coverage, CUDA-related edits \(labels yes\): 100\.0 % \(3/3\)' '$tmp/out'"
check "the migrated file compiles with CPython" "grep -qE 'compile of 1 migrated .py files: 0 broken' '$tmp/out'"
check "the analyser outputs are kept with --work" "[ -f '$tmp/w/mini/analyse_torch_apis/mini_analysis/report.json' ]"

python3 "$score" --portkit "$PORTKIT" --checkout "$fix/mini" --labels "$fix/labels_bad.tsv" \
  >"$tmp/bad.out" 2>&1; rc=$?
check "a bad label file exits 2" "[ $rc = 2 ]"
check "the message names the file and line" "grep -q 'labels_bad.tsv:3: unknown kind' '$tmp/bad.out'"

python3 "$score" --portkit "$PORTKIT" --corpora "$tmp/none" --labels-dir bench/real_code/labels \
  >"$tmp/skip.out" 2>&1; rc=$?
check "no corpora folder: exit 77" "[ $rc = 77 ]"
mkdir -p "$tmp/empty"
python3 "$score" --portkit "$PORTKIT" --corpora "$tmp/empty" --labels-dir bench/real_code/labels \
  >"$tmp/skip2.out" 2>&1; rc=$?
check "no labelled checkout in the corpora folder: exit 77" "[ $rc = 77 ] && grep -q SKIP '$tmp/skip2.out'"
check "every shipped label file parses" "python3 -c 'import sys; sys.path.insert(0, \"bench/real_code\"); import score, glob; [score.read_labels(p) for p in glob.glob(\"bench/real_code/labels/*.tsv\")]'"

# The scoring rules themselves, on hand-made rows (no analyser involved).
cat >"$tmp/rules.py" <<'PY'
import io, sys
sys.path.insert(0, "bench/real_code")
import score
L = score.Label
fu = L("full_unsupported", "a.py", None, "pkg.mod.Class.fn", "yes", "sample", "", "t")
assert score.label_matches(fu, ("a.py", None, None, "pkg.mod.Class.fn"))
assert score.label_matches(fu, ("a.py", None, None, "pkg.other_spelling.Class.fn"))  # same function
assert not score.label_matches(fu, ("a.py", None, None, "pkg.mod.Other.fn"))
assert not score.label_matches(fu, ("b.py", None, None, "pkg.mod.Class.fn"))
ln = L("cuda", "a.py", 5, "*", "yes", "list", "", "t")
assert score.label_matches(ln, ("a.py", 4, 6, "x")) and not score.label_matches(ln, ("a.py", 6, 7, "x"))
# affinity: a right place with a replacement torch_npu does not have counts as a false positive
rows = [("a.py", 3, 3, "torch.optim.Adam -> torch_npu.optim.NpuFusedAdam"),
        ("a.py", 7, 7, "x[x > 0] = 0 -> torch_npu.not_a_real_api")]
labs = [L("affinity", "a.py", 3, "torch.optim.Adam", "yes", "sample", "", "t"),
        L("affinity", "a.py", 7, "*", "yes", "sample", "", "t")]
fig = score.score_kind("affinity", labs, rows, io.StringIO())
assert fig["counts"]["precision"] == [1, 2], fig
# recall counts only list labels; precision counts sample and list labels that were reported
labs = [L("cuda", "a.py", 1, "*", "yes", "list", "", "t"), L("cuda", "a.py", 2, "*", "yes", "list", "", "t"),
        L("cuda", "a.py", 3, "*", "no", "list", "", "t"), L("cuda", "a.py", 9, "*", "yes", "sample", "", "t")]
fig = score.score_kind("cuda", labs, [("a.py", 1, 1, "c"), ("a.py", 3, 3, "c"), ("a.py", 9, 9, "c")], io.StringIO())
assert fig["counts"]["recall"] == [1, 2] and fig["counts"]["precision"] == [2, 3], fig
print("rules ok")
PY
check "scoring rules: suffix match of third-party names, line spans, name check, recall over lists" "python3 '$tmp/rules.py'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
