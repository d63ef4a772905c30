#!/usr/bin/env bash
# portkit migrate: the golden change list, the patch applies to the original with patch -p1 and
# gives the migrated copy, every migrated file parses, and migrating the output changes nothing.
source "$(dirname "$0")/harness.sh"

golden=tests/golden/migrate_cifar
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"; rc=$?
copy="$tmp/out/cifar_cuda_msft"
check "migrate exits 0" "[ $rc = 0 ]"
if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
  mkdir -p "$golden" && cp "$copy/change_list.csv" "$copy/migration.patch" "$golden/"
fi
check "change_list.csv matches the golden copy" "diff -u '$golden/change_list.csv' '$copy/change_list.csv'"
check "migration.patch matches the golden copy" "diff -u '$golden/migration.patch' '$copy/migration.patch'"
check "change_list.csv has the exact header" "head -1 '$copy/change_list.csv' | grep -qx 'File,Start Line,End Line,Operation Type,Message'"
cp -r examples/cifar_cuda "$tmp/orig"
check "the patch applies with patch -p1" "(cd '$tmp/orig' && patch -p1 -s < '$copy/migration.patch')"
check "patched original equals the migrated copy" "diff -r -x change_list.csv -x migration.patch -x migration_log.txt -x .portkit-output '$tmp/orig' '$copy'"
check "no cuda device strings or torch.cuda calls remain" "! grep -rn --include=*.py -e '\"cuda' -e 'torch\\.cuda\\.' -e '\\.cuda()' '$copy'"
"$PORTKIT" analyse -i "$copy" -o "$tmp/parse" --format json >/dev/null 2>"$tmp/parse.err"
check "every migrated file parses" "! grep -q 'syntax error:' '$tmp/parse.err' && grep -q '(0 with syntax errors)' '$tmp/parse.err'"
"$PORTKIT" migrate -i "$copy" -o "$tmp/again" >/dev/null 2>&1; rc=$?
check "migrating the output again changes nothing" "[ $rc = 0 ] && [ \$(wc -l < '$tmp/again/cifar_cuda_msft_msft/change_list.csv') = 1 ] && [ ! -s '$tmp/again/cifar_cuda_msft_msft/migration.patch' ]"
"$PORTKIT" migrate -i "$tmp/missing" -o "$tmp/x" >/dev/null 2>"$tmp/m.err"; rc=$?
check "missing input exits 2" "[ $rc = 2 ] && grep -q 'does not exist' '$tmp/m.err'"
# --unsafe applies affinity replacements.
mkdir -p "$tmp/unsafe"
printf 'import torch\n\ndef f(x: torch.Tensor, model):\n    cond = x < 0.5\n    x[cond] = 0.0\n    return torch.optim.AdamW(model.parameters())\n' > "$tmp/unsafe/m.py"
"$PORTKIT" migrate -i "$tmp/unsafe" -o "$tmp/u1" >/dev/null 2>&1
check "without --unsafe affinity is not applied" "! grep -q NpuFused '$tmp/u1/unsafe_msft/m.py'"
"$PORTKIT" migrate -i "$tmp/unsafe" -o "$tmp/u2" --unsafe >/dev/null 2>&1
check "--unsafe applies affinity replacements" "grep -q 'x = torch_npu.npu_fast_condition_index_put(x, cond, 0.0)' '$tmp/u2/unsafe_msft/m.py' && grep -q 'torch_npu.optim.NpuFusedAdamW(' '$tmp/u2/unsafe_msft/m.py' && grep -q '^import torch_npu$' '$tmp/u2/unsafe_msft/m.py'"
# --format json: change_list.json (readable by json.load) with the same changes as the CSV.
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/json" --format json >"$tmp/json.out" 2>/dev/null; rc=$?
check "--format json writes change_list.json and no CSV" "[ $rc = 0 ] && [ -f '$tmp/json/cifar_cuda_msft/change_list.json' ] && [ ! -e '$tmp/json/cifar_cuda_msft/change_list.csv' ] && grep -q 'change_list.json' '$tmp/json.out'"
check "change_list.json loads with json.load and matches change_list.csv" "python3 -c '
import csv, json, sys
d = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2], encoding=\"utf-8\")))
assert d[\"files\"] == {\"changed\": 2, \"copied\": 12}, d[\"files\"]
assert [(c[\"file\"], str(c[\"start_line\"]), c[\"operation\"], c[\"message\"]) for c in d[\"changes\"]] == [(r[\"File\"], r[\"Start Line\"], r[\"Operation Type\"], r[\"Message\"]) for r in rows]
' '$tmp/json/cifar_cuda_msft/change_list.json' '$golden/change_list.csv'"
check "the default writes no change_list.json" "[ ! -e '$copy/change_list.json' ]"
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/early" --target nosuchtarget >/dev/null 2>"$tmp/early.err"; rc=$?
check "an unknown target exits 2 and creates nothing" "[ $rc = 2 ] && grep -q \"unknown target 'nosuchtarget'\" '$tmp/early.err' && [ ! -e '$tmp/early' ]"
"$PORTKIT" migrate -i examples/cifar_cuda -o /proc/portkit-unwritable >/dev/null 2>"$tmp/unw.err"; rc=$?
check "an unwritable output exits 2" "[ $rc = 2 ] && grep -q 'cannot be' '$tmp/unw.err'"
echo "migrate: $pass passed, $fail failed"
[ $fail = 0 ]
