#!/usr/bin/env bash
# CLI behaviour of `portkit analyse` on bad input: exit codes and messages.
source "$(dirname "$0")/harness.sh"

"$PORTKIT" --version >"$tmp/v" 2>&1; rc=$?
check "--version prints the version" "[ $rc = 0 ] && grep -q '^portkit [0-9]' '$tmp/v'"
"$PORTKIT" --help >"$tmp/h" 2>&1; rc=$?
check "--help lists analyse" "[ $rc = 0 ] && grep -q 'analyse' '$tmp/h'"
"$PORTKIT" nosuchcmd >"$tmp/u" 2>&1; rc=$?
check "unknown command exits 2" "[ $rc = 2 ] && grep -q \"unknown command 'nosuchcmd'\" '$tmp/u'"
"$PORTKIT" analyse --help >"$tmp/ah" 2>&1; rc=$?
check "analyse --help lists every flag and mode" "[ $rc = 0 ] && for f in --input --output --version --mode --target --env-path --jobs --format torch_apis third_party affinity_apis dynamic_shape; do grep -q -- \"\$f\" '$tmp/ah' || exit 1; done"

"$PORTKIT" analyse -i "$tmp/missing" -o "$tmp/out" >"$tmp/m" 2>&1; rc=$?
check "missing input exits 2 naming it" "[ $rc = 2 ] && grep -q \"input $tmp/missing does not exist\" '$tmp/m'"
touch "$tmp/file"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/file" >"$tmp/o" 2>&1; rc=$?
check "output that is a file exits 2" "[ $rc = 2 ] && grep -q 'cannot be created' '$tmp/o'"
"$PORTKIT" analyse -o "$tmp/out" >"$tmp/r" 2>&1; rc=$?
check "missing -i exits 2" "[ $rc = 2 ] && grep -qi 'input is required' '$tmp/r'"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/out" --format xml >"$tmp/f" 2>&1; rc=$?
check "unknown format exits 2" "[ $rc = 2 ] && grep -q \"unknown format 'xml'\" '$tmp/f'"

# A project with every kind of bad file.
p="$tmp/badproj"
mkdir -p "$p/sub"
printf 'import torch\nx = max(a,, a)\ntorch.cdist(a, b)\n' > "$p/broken.py"
printf '# caf\xe9\nimport torch\n' > "$p/latin1.py"
printf 'import torch\x00\x01\x02' > "$p/binary.py"
: > "$p/empty.py"
ln -s .. "$p/sub/loop"
ln -s "$p/nowhere" "$p/dangling.py"
"$PORTKIT" analyse -i "$p" -o "$tmp/badout" -v 2.1.0 -env "$p/sub" >"$tmp/b.out" 2>"$tmp/b.err"; rc=$?
res="$tmp/badout/badproj_analysis"
check "bad files do not stop the run" "[ $rc = 0 ]"
check "syntax error reported with file:line:col" "grep -q 'badproj/broken.py:2:[0-9]*: syntax error' '$tmp/b.err'"
check "parsable part of a broken file still analysed" "grep -q 'badproj/broken.py,3,3,torch.cdist' '$res/unsupported_api.csv'"
check "non-UTF-8 file reported" "grep -q 'badproj/latin1.py:1:6: skipped: not valid UTF-8' '$tmp/b.err'"
check "binary file reported" "grep -q 'badproj/binary.py: skipped: binary file' '$tmp/b.err'"

# A Latin-1 file with a PEP 263 coding line is analysed (read as Latin-1); SARIF columns count
# its characters, not the bytes of its UTF-8 form. migrate still leaves it alone (it writes files).
l1="$tmp/l1proj"
mkdir -p "$l1"
printf '# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch\n\ndef f():\n    s = "d\xe9j\xe0"; torch.cuda.synchronize()\n    return s\n' > "$l1/decl.py"
"$PORTKIT" analyse -i "$l1" -o "$tmp/l1out" --format csv,sarif >/dev/null 2>"$tmp/l1.err"; rc=$?
check "a Latin-1 file with a coding line is analysed" "[ $rc = 0 ] && ! grep -q 'not valid UTF-8' '$tmp/l1.err' && grep -q 'l1proj/decl.py,torch.cuda.synchronize' '$tmp/l1out/l1proj_analysis/cuda_op_list.csv'"
check "its SARIF column counts characters (17, not the UTF-8 byte column 19)" "python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))[\"runs\"][0][\"results\"][0][\"locations\"][0][\"physicalLocation\"][\"region\"]
assert (r[\"startLine\"], r[\"startColumn\"]) == (6, 17), r
' '$tmp/l1out/l1proj_analysis/report.sarif'"
check "empty file reported" "grep -q 'badproj/empty.py: empty file' '$tmp/b.err'"
# Links are never followed (docs/safety.md): noted, not entered, so a loop cannot loop.
check "symlink loop reported" "grep -q 'badproj/sub/loop: symbolic link to ..; not followed' '$tmp/b.err'"
check "dangling symlink reported" "grep -q 'badproj/dangling.py: symbolic link to .*nowhere; not followed' '$tmp/b.err'"
check "syntax errors counted in the summary" "grep -q '| (files with syntax errors) |     1      |' '$tmp/b.out'"
check "problems listed in report.json" "grep -q '\"kind\": \"syntax_error\"' '$res/report.json'"
check "nothing written outside the results folder" "[ \"\$(ls -A '$tmp/badout')\" = badproj_analysis ]"

# Inputs that crashed earlier builds (fuzzer finds) and pathological nesting: reported, never a crash.
mkdir -p "$tmp/crashers"
for f in tests/fuzz/crashes/*; do
  case "$f" in *.md) continue ;; esac
  cp "$f" "$tmp/crashers/$(basename "$f" .py).py"
done
python3 -c "print('x = ' + '(' * 20000 + '1' + ')' * 20000)" > "$tmp/crashers/deep_parens.py"
python3 -c "print('x = ' + ' + '.join(['a'] * 30000))" > "$tmp/crashers/long_sum.py"
python3 -c "print('x = f' + '()' * 20000)" > "$tmp/crashers/call_chain.py"
python3 -c "print('import torch\nx = torch' + '.a' * 20000 + '.cuda()')" > "$tmp/crashers/attr_chain.py"
"$PORTKIT" analyse -i "$tmp/crashers" -o "$tmp/crout" -j 1 >/dev/null 2>"$tmp/cr.err"; rc=$?
check "fuzzer crash inputs and deep nesting are analysed without crashing" "[ $rc = 0 ]"
check "deep nesting is reported" "grep -q 'nested deeper than' '$tmp/cr.err'"

# -env: names re-exported by an extra import root resolve (and that root is not reported).
mkdir -p "$tmp/envroot/extlib" "$tmp/envuser"
printf 'from torch import cdist as fast_distance\n' > "$tmp/envroot/extlib/__init__.py"
printf 'import torch\nbad = torch.heaviside(a, b)\n' > "$tmp/envroot/extlib/other.py"
printf 'from extlib import fast_distance\nd = fast_distance(a, b)\n' > "$tmp/envuser/train.py"
"$PORTKIT" analyse -i "$tmp/envuser" -o "$tmp/envout" -v 2.1.0 >/dev/null 2>&1
check "without -env the re-export is not resolved" "! grep -q torch.cdist '$tmp/envout/envuser_analysis/unsupported_api.csv'"
"$PORTKIT" analyse -i "$tmp/envuser" -o "$tmp/envout2" -v 2.1.0 -env "$tmp/envroot" >/dev/null 2>&1
check "-env resolves names through an extra import root" "grep -q 'envuser/train.py,2,2,torch.cdist' '$tmp/envout2/envuser_analysis/unsupported_api.csv'"
check "-env roots are not reported" "! grep -q heaviside '$tmp/envout2/envuser_analysis/unsupported_api.csv'"

# Version fallback warns and says which list is used.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/vout" -v 2.4.1 >/dev/null 2>"$tmp/w"; rc=$?
check "other versions use the nearest list with a warning" "[ $rc = 0 ] && grep -q 'no npu support list for torch 2.4.1; using the nearest, torch 2.6' '$tmp/w'"

# Output folder that cannot be written (skipped when running as root, which may write anywhere).
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$tmp/ro" && chmod a-w "$tmp/ro"
  "$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/ro/out" >/dev/null 2>"$tmp/ro.err"; rc=$?
  check "unwritable output exits 2" "[ $rc = 2 ] && grep -q 'cannot be created' '$tmp/ro.err'"
fi
# Results inside the input folder are never analysed as input.
cp -r examples/cifar_cuda "$tmp/selfin"
"$PORTKIT" analyse -i "$tmp/selfin" -o "$tmp/selfin" >/dev/null 2>&1
"$PORTKIT" analyse -i "$tmp/selfin" -o "$tmp/selfin" >/dev/null 2>"$tmp/self.err"; rc=$?
check "output inside input is skipped" "[ $rc = 0 ] && ! grep -q 'selfin_analysis/' '$tmp/self.err'"

# --format json: report.json alone, readable by python's json module.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/jout" -v 2.1.0 --format json >/dev/null 2>&1; rc=$?
check "--format json exits 0 and writes only report.json" "[ $rc = 0 ] && [ \"\$(ls '$tmp/jout/cifar_cuda_analysis' | grep -v pytorch_analysis.txt)\" = report.json ]"
check "report.json loads with json.load" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"mode\"] == \"torch_apis\" and len(d[\"findings\"]) == 41, d[\"mode\"]' '$tmp/jout/cifar_cuda_analysis/report.json'"
# -m dynamic_shape writes only its copy, and with --format json a report of what it instrumented.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/dyn" -m dynamic_shape >/dev/null 2>&1; rc=$?
check "dynamic_shape writes no report files by default" "[ $rc = 0 ] && [ ! -e '$tmp/dyn/cifar_cuda_analysis/report.json' ] && [ -f '$tmp/dyn/cifar_cuda_analysis/msft_dynamic_analysis/hook.py' ]"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/dynj" -m dynamic_shape --format json >/dev/null 2>&1; rc=$?
check "dynamic_shape --format json reports the instrumented copy" "[ $rc = 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d[\"instrumented_copy\"]; assert d[\"mode\"] == \"dynamic_shape\" and c[\"files_copied\"] >= 12, c' '$tmp/dynj/cifar_cuda_analysis/report.json'"

# The findings gate: reports are written, then exit 1 when findings of the named categories exist.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/gate" -v 2.1.0 --fail-on unsupported >"$tmp/gate.out" 2>"$tmp/gate.err"; rc=$?
check "--fail-on unsupported exits 1 with the count" "[ $rc = 1 ] && grep -q 'findings gate: 7 findings of --fail-on unsupported' '$tmp/gate.err'"
check "--fail-on still writes the reports and the table" "[ -s '$tmp/gate/cifar_cuda_analysis/unsupported_api.csv' ] && grep -q 'unsupported_api.csv' '$tmp/gate.out'"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/gate2" --fail-on affinity >/dev/null 2>&1; rc=$?
check "--fail-on with no such findings exits 0" "[ $rc = 0 ]"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/gate3" --fail-on nosuch >/dev/null 2>"$tmp/gate3.err"; rc=$?
check "--fail-on with an unknown category exits 2 before any work" "[ $rc = 2 ] && grep -q \"unknown category 'nosuch'\" '$tmp/gate3.err' && [ ! -e '$tmp/gate3' ]"
# Bad values are refused before anything is created.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/early" --target nosuchtarget >/dev/null 2>"$tmp/early.err"; rc=$?
check "an unknown target exits 2 and creates nothing" "[ $rc = 2 ] && grep -q \"unknown target 'nosuchtarget'\" '$tmp/early.err' && [ ! -e '$tmp/early' ]"
head -c 2048 /dev/urandom > "$tmp/garbage.csv"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/early2" -api "$tmp/garbage.csv" >/dev/null 2>"$tmp/early2.err"; rc=$?
check "a corrupt -api file exits 2 naming it and creates nothing" "[ $rc = 2 ] && grep -q 'garbage.csv' '$tmp/early2.err' && [ ! -e '$tmp/early2' ]"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/early3" -j 0 >/dev/null 2>&1; rc=$?
check "-j 0 exits 2 and creates nothing" "[ $rc = 2 ] && [ ! -e '$tmp/early3' ]"

echo "cli: $pass passed, $fail failed"
[ $fail = 0 ]
