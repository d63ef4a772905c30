#!/usr/bin/env bash
# portkit migrate: the golden change list, the patch applies to the original with patch -p1 and
# gives the migrated copy, every migrated file parses, and migrating the output changes nothing.
source "$(dirname "$0")/harness.sh"

golden=tests/golden/migrate_cifar
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"; rc=$?
copy="$tmp/out/cifar_cuda_msft"
check "migrate exits 0" "[ $rc = 0 ]"
if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
  mkdir -p "$golden" && cp "${copy}_report/change_list.csv" "${copy}_report/migration.patch" "$golden/"
fi
check "change_list.csv matches the golden copy" "diff -u '$golden/change_list.csv' '${copy}_report/change_list.csv'"
check "migration.patch matches the golden copy" "diff -u '$golden/migration.patch' '${copy}_report/migration.patch'"
check "change_list.csv has the exact header" "head -1 '${copy}_report/change_list.csv' | grep -qx 'File,Start Line,End Line,Operation Type,Message'"
cp -r examples/cifar_cuda "$tmp/orig"
check "the patch applies with patch -p1" "(cd '$tmp/orig' && patch -p1 -s < '${copy}_report/migration.patch')"
check "patched original equals the migrated copy" "diff -r -x .portkit-output '$tmp/orig' '$copy'"
check "the reports are beside the copy, not inside it" \
  "[ \"\$(ls '${copy}_report')\" = \"\$(printf 'change_list.csv\nmigration.patch\nmigration_log.txt')\" ] && [ \"\$(ls '$tmp/out')\" = \"\$(printf 'cifar_cuda_msft\ncifar_cuda_msft_report')\" ]"
check "the console names the reports folder" "grep -q 'the reports are beside it in .*cifar_cuda_msft_report' '$tmp/stderr'"
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/out" >/dev/null 2>&1; rc=$?
check "a second run into the same -o replaces its own reports" "[ $rc = 0 ] && diff -u '$golden/change_list.csv' '${copy}_report/change_list.csv'"
mkdir -p "$tmp/mine/cifar_cuda_msft_report" && echo notes >"$tmp/mine/cifar_cuda_msft_report/notes.txt"
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/mine" >/dev/null 2>"$tmp/mine.err"; rc=$?
check "a reports folder portkit did not write is refused without --force" \
  "[ $rc = 2 ] && grep -q 'cifar_cuda_msft_report already exists and was not written by portkit migrate' '$tmp/mine.err' && [ ! -e '$tmp/mine/cifar_cuda_msft' ]"
check "no cuda device strings or torch.cuda calls remain" "! grep -rn --include=*.py -e '\"cuda' -e 'torch\\.cuda\\.' -e '\\.cuda()' '$copy'"
"$PORTKIT" analyse -i "$copy" -o "$tmp/parse" --format json >/dev/null 2>"$tmp/parse.err"
check "every migrated file parses" "! grep -q 'syntax error:' '$tmp/parse.err' && grep -q '(0 with syntax errors)' '$tmp/parse.err'"
"$PORTKIT" migrate -i "$copy" -o "$tmp/again" >/dev/null 2>&1; rc=$?
check "migrating the output again changes nothing (review rows only)" "[ $rc = 0 ] && [ \$(grep -vc ',Review,' '$tmp/again/cifar_cuda_msft_msft_report/change_list.csv') = 1 ] && [ ! -s '$tmp/again/cifar_cuda_msft_msft_report/migration.patch' ]"
"$PORTKIT" migrate -i "$tmp/missing" -o "$tmp/x" >/dev/null 2>"$tmp/m.err"; rc=$?
check "missing input exits 2" "[ $rc = 2 ] && grep -q 'does not exist' '$tmp/m.err'"
# --unsafe applies affinity replacements.
mkdir -p "$tmp/unsafe"
printf 'import torch\n\ndef f(x: torch.Tensor, model):\n    cond = x < 0.5\n    x[cond] = 0.0\n    return torch.optim.AdamW(model.parameters())\n\ndef g(y: torch.Tensor):\n    z = y * 2\n    z[z < 0.5] = 0.0\n    return z\n' > "$tmp/unsafe/m.py"
"$PORTKIT" migrate -i "$tmp/unsafe" -o "$tmp/u1" >/dev/null 2>&1
check "without --unsafe affinity is not applied" "! grep -q NpuFused '$tmp/u1/unsafe_msft/m.py'"
"$PORTKIT" migrate -i "$tmp/unsafe" -o "$tmp/u2" --unsafe >"$tmp/u2.out" 2>&1
check "--unsafe applies affinity replacements" "grep -q 'z = torch_npu.contrib.function.npu_fast_condition_index_put(z, z < 0.5, 0.0)' '$tmp/u2/unsafe_msft/m.py' && grep -q 'torch_npu.optim.NpuFusedAdamW(' '$tmp/u2/unsafe_msft/m.py' && grep -q '^import torch_npu$' '$tmp/u2/unsafe_msft/m.py' && grep -q '^import torch_npu.contrib.function$' '$tmp/u2/unsafe_msft/m.py'"
check "--unsafe keeps an in-place write the caller can see (a parameter) and says so" "grep -q '    x\[cond\] = 0.0' '$tmp/u2/unsafe_msft/m.py' && grep -q 'returns a new tensor and x may be relied on as changed in place' '$tmp/u2.out'"
# --format json: change_list.json (readable by json.load) with the same changes as the CSV.
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/json" --format json >"$tmp/json.out" 2>/dev/null; rc=$?
check "--format json writes change_list.json and no CSV" "[ $rc = 0 ] && [ -f '$tmp/json/cifar_cuda_msft_report/change_list.json' ] && [ ! -e '$tmp/json/cifar_cuda_msft_report/change_list.csv' ] && grep -q 'change_list.json' '$tmp/json.out'"
check "change_list.json loads with json.load and matches change_list.csv" "python3 -c '
import csv, json, sys
d = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2], encoding=\"utf-8\")))
assert d[\"files\"] == {\"changed\": 2, \"copied\": 12}, d[\"files\"]
assert [(c[\"file\"], str(c[\"start_line\"]), c[\"operation\"], c[\"message\"]) for c in d[\"changes\"]] == [(r[\"File\"], r[\"Start Line\"], r[\"Operation Type\"], r[\"Message\"]) for r in rows]
' '$tmp/json/cifar_cuda_msft_report/change_list.json' '$golden/change_list.csv'"
check "the default writes no change_list.json" "[ ! -e '${copy}_report/change_list.json' ]"
"$PORTKIT" migrate -i examples/cifar_cuda -o "$tmp/early" --target nosuchtarget >/dev/null 2>"$tmp/early.err"; rc=$?
check "an unknown target exits 2 and creates nothing" "[ $rc = 2 ] && grep -q \"unknown target 'nosuchtarget'\" '$tmp/early.err' && [ ! -e '$tmp/early' ]"
"$PORTKIT" migrate -i examples/cifar_cuda -o /proc/portkit-unwritable >/dev/null 2>"$tmp/unw.err"; rc=$?
check "an unwritable output exits 2" "[ $rc = 2 ] && grep -q 'cannot be' '$tmp/unw.err'"

# What a port needs (tests/fixtures/migrate/port): argument rewrites of the reference data, env
# vars, backend names and guards, device strings in any case and in format()/f-strings, profile
# and DataLoader keywords, imports below docstrings and __future__ imports, a warning for an API
# the target does not support (torch 2.1), combine_grad=True for Ascend's apex amp.initialize with
# optimizers and a torch.load map_location holding None kept for review (pkg/checkpoint.py), all
# checked against the golden change list and patch.
golden=tests/golden/migrate_port
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/port" -v 2.1.0 --format csv,json >"$tmp/port.out" 2>"$tmp/port.err"; rc=$?
pcopy="$tmp/port/port_msft"
check "migrate of the port fixture exits 0" "[ $rc = 0 ]"
if [ "${UPDATE_GOLDENS:-0}" = 1 ]; then
  mkdir -p "$golden" && cp "${pcopy}_report/change_list.csv" "${pcopy}_report/migration.patch" "$golden/"
fi
check "port: change_list.csv matches the golden copy" "diff -u '$golden/change_list.csv' '${pcopy}_report/change_list.csv'"
check "port: migration.patch matches the golden copy" "diff -u '$golden/migration.patch' '${pcopy}_report/migration.patch'"
check "port: every migrated file compiles with python3" "python3 -c '
import pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).rglob(\"*.py\")):
    compile(p.read_bytes(), str(p), \"exec\", dont_inherit=True)
' '$pcopy'"
check "port: the import goes below the shebang, comments, docstring and __future__ import" "sed -n 5,6p '$pcopy/pkg/env.py' | tr '\n' '|' | grep -qx 'from __future__ import print_function|import torch_npu|'"
check "port: the unsupported API is left unchanged with a warning" "grep -q 'return torch.cuda.get_device_capability()' '$pcopy/train.py' && grep -q 'torch.cuda.get_device_capability is not supported on npu (torch 2.1)' '$tmp/port.err' && python3 -c '
import json, sys
w = [x for x in json.load(open(sys.argv[1]))[\"warnings\"] if x[\"kind\"] == \"unsupported_api\"]
assert [(x[\"file\"], x[\"line\"]) for x in w] == [(\"port/train.py\", 61)], w
' '${pcopy}_report/change_list.json'"
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/port28" >/dev/null 2>&1
check "port: with the newest list (supported there) the API is renamed" "grep -q 'return torch.npu.get_device_capability()' '$tmp/port28/port_msft/train.py'"
"$PORTKIT" migrate -i "$pcopy" -o "$tmp/port_again" -v 2.1.0 >/dev/null 2>&1
check "port: migrating the output again changes nothing" "[ \$(grep -vc ',Review,' '$tmp/port_again/port_msft_msft_report/change_list.csv') = 1 ]"

# The target's import line, once per program: the entry script gets it; modules it imports at its
# top level do not, unless the rewrite names the module (torch_npu.profiler); a module no entry
# script imports keeps it with a Review row. --import-policy every-file puts it in every file.
"$PORTKIT" migrate -i tests/fixtures/migrate/imports -o "$tmp/imp" >"$tmp/imp.out" 2>"$tmp/imp.err"; rc=$?
icopy="$tmp/imp/imports_msft"
check "imports: the entry script gets the import" "[ $rc = 0 ] && sed -n 2,3p '$icopy/run.py' | tr '\n' '|' | grep -qx 'import torch|import torch_npu|'"
check "imports: modules the entry script loads get none" "! grep -q torch_npu '$icopy/lib/helpers.py' && ! grep -q torch_npu '$icopy/lib/model.py' && grep -q 'torch.npu.synchronize()' '$icopy/lib/helpers.py' && grep -q 'to(\"npu:0\")' '$icopy/lib/model.py'"
check "imports: a module whose rewrite names torch_npu keeps it" "grep -qx 'import torch_npu' '$icopy/lib/prof.py' && grep -q 'torch_npu.profiler.profile(' '$icopy/lib/prof.py'"
check "imports: a module no entry script imports keeps it, listed for review" "grep -qx 'import torch_npu' '$icopy/tools/stats.py' && grep -q '^imports/tools/stats.py,3,3,Review,\"import torch_npu added: no entry script of the project' '${icopy}_report/change_list.csv' && [ \$(grep -c ',Review,' '${icopy}_report/change_list.csv') = 1 ]"
check "imports: the log says how many files were left to the entry scripts" "grep -q 'import torch_npu left to the entry scripts that load 2 changed files' '$tmp/imp.err'"
"$PORTKIT" migrate -i tests/fixtures/migrate/imports -o "$tmp/imp_every" --import-policy every-file >/dev/null 2>&1; rc=$?
check "imports: --import-policy every-file imports in every changed file, no review" "[ $rc = 0 ] && [ \$(grep -lx 'import torch_npu' -r '$tmp/imp_every/imports_msft' | wc -l) = 5 ] && ! grep -q ',Review,' '$tmp/imp_every/imports_msft_report/change_list.csv'"
"$PORTKIT" migrate -i tests/fixtures/migrate/imports -o "$tmp/imp_bad" --import-policy some >/dev/null 2>"$tmp/imp_bad.err"; rc=$?
check "imports: an unknown --import-policy exits 2" "[ $rc = 2 ] && grep -q 'import-policy' '$tmp/imp_bad.err'"
"$PORTKIT" migrate -i "$icopy" -o "$tmp/imp_again" >/dev/null 2>&1
check "imports: migrating the output again changes nothing" "[ \$(grep -vc ',Review,' '$tmp/imp_again/imports_msft_msft_report/change_list.csv') = 1 ]"

# CRLF files keep CRLF line ends, the inserted import included.
mkdir -p "$tmp/crlf"
printf '"""Doc."""\r\nimport torch\r\n\r\n\r\ndef f(x):\r\n    return x.cuda()\r\n' > "$tmp/crlf/m.py"
printf 'import os\r\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"' > "$tmp/crlf/noeol.py"
"$PORTKIT" migrate -i "$tmp/crlf" -o "$tmp/crlf_out" >/dev/null 2>&1
check "CRLF: every line of the migrated file ends with CRLF" "python3 -c '
import sys
for name in (\"m.py\", \"noeol.py\"):
    data = open(sys.argv[1] + \"/\" + name, \"rb\").read()
    assert b\"import torch_npu\" in data, name
    assert data.count(b\"\\n\") == data.count(b\"\\r\\n\"), (name, data)
assert open(sys.argv[1] + \"/m.py\", \"rb\").read() == b\"\\\"\\\"\\\"Doc.\\\"\\\"\\\"\\r\\nimport torch\\r\\nimport torch_npu\\r\\n\\r\\n\\r\\ndef f(x):\\r\\n    return x.npu()\\r\\n\"
' '$tmp/crlf_out/crlf_msft'"

# An edit that CPython rejects (a rewritten argument inside a single-quoted f-string, which
# python < 3.12 cannot parse) is undone and reported; the tree-sitter parser accepts it.
if python3 -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then
  mkdir -p "$tmp/fstr"
  printf "import torch\n\n\ndef f(x, rank):\n    return f'{x.to(rank)}'\n" > "$tmp/fstr/m.py"
  "$PORTKIT" migrate -i "$tmp/fstr" -o "$tmp/fstr_out" --format json >/dev/null 2>"$tmp/fstr.err"; rc=$?
  check "CPython check: a file the edits break is left unchanged and reported" "[ $rc = 0 ] && cmp -s '$tmp/fstr/m.py' '$tmp/fstr_out/fstr_msft/m.py' && grep -q 'does not compile with python3' '$tmp/fstr.err' && grep -q '\"not_migrated\"' '$tmp/fstr_out/fstr_msft_report/change_list.json'"
fi

# --transfer-only: only the target's import line and the transfer import, after the torch imports
# of the entry scripts that import torch.
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/tr" --transfer-only >/dev/null 2>&1; rc=$?
tcopy="$tmp/tr/port_msft"
check "--transfer-only changes only the entry script, by two lines" "[ $rc = 0 ] && [ \$(grep -c '^+[^+]' '${tcopy}_report/migration.patch') = 2 ] && grep -qx '+from torch_npu.contrib import transfer_to_npu' '${tcopy}_report/migration.patch' && grep -q '^+++ b/train.py' '${tcopy}_report/migration.patch'"
check "--transfer-only puts the lines right after import torch" "sed -n 8,10p '$tcopy/train.py' | tr '\n' '|' | grep -qx 'import torch|import torch_npu|from torch_npu.contrib import transfer_to_npu|'"
"$PORTKIT" migrate -i tests/fixtures/migrate/transfer -o "$tmp/trx" --transfer-only >/dev/null 2>&1; rc=$?
xcopy="$tmp/trx/transfer_msft"
check "--transfer-only: exactly the two entry scripts that import torch change" "[ $rc = 0 ] && [ \"\$(grep '^+++ ' '${xcopy}_report/migration.patch' | tr '\n' '|')\" = '+++ b/infer.py|+++ b/train.py|' ]"
check "--transfer-only: an entry script importing torch_npu gets only the transfer import" "sed -n 1,3p '$xcopy/infer.py' | tr '\n' '|' | grep -qx 'import torch|import torch_npu|from torch_npu.contrib import transfer_to_npu|' && [ \$(grep -c torch_npu '$xcopy/infer.py') = 3 ]"
check "--transfer-only: CUDA calls, backends and env vars are kept" "grep -q 'Net().cuda()' '$xcopy/train.py' && grep -q 'backend=\"nccl\"' '$xcopy/train.py' && grep -q CUDA_VISIBLE_DEVICES '$xcopy/train.py' && cmp -s tests/fixtures/migrate/transfer/lib/model.py '$xcopy/lib/model.py'"
"$PORTKIT" migrate -i tests/fixtures/migrate/transfer -o "$tmp/trdry" --transfer-only --dry-run >"$tmp/trdry.out" 2>/dev/null; rc=$?
check "--transfer-only --dry-run: 3 import edits in 2 files, nothing else, nothing written" "[ $rc = 0 ] && grep -qE '^\| +import +\| +3 +\| +2 +\|' '$tmp/trdry.out' && [ \$(grep -cE '^\| +[a-z_]+ +\| +[0-9]+ +\| +[0-9]+ +\|' '$tmp/trdry.out') = 1 ] && [ ! -e '$tmp/trdry' ]"
check "--transfer-only: an entry script without torch is left alone" "cmp -s tests/fixtures/migrate/transfer/tools/stats.py '$xcopy/tools/stats.py'"
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/tr5" --transfer-to-npu >/dev/null 2>&1; rc=$?
check "--transfer-to-npu (the issue's spelling) is --transfer-only" "[ $rc = 0 ] && cmp -s '${tcopy}_report/migration.patch' '$tmp/tr5/port_msft_report/migration.patch'"
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/tr2" --transfer-only --entry pkg/model.py >/dev/null 2>&1; rc=$?
check "--entry names the entry scripts instead" "[ $rc = 0 ] && grep -q '^+++ b/pkg/model.py' '$tmp/tr2/port_msft_report/migration.patch' && ! grep -q '^+++ b/train.py' '$tmp/tr2/port_msft_report/migration.patch'"
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/tr3" --transfer-only --entry ../x.py >/dev/null 2>"$tmp/tr3.err"; rc=$?
check "--entry outside the input exits 2" "[ $rc = 2 ] && grep -q 'not a file inside the input folder' '$tmp/tr3.err'"
"$PORTKIT" migrate -i tests/fixtures/migrate/port -o "$tmp/tr4" --entry train.py >/dev/null 2>"$tmp/tr4.err"; rc=$?
check "--entry without --transfer-only exits 2" "[ $rc = 2 ]"

echo "migrate: $pass passed, $fail failed"
[ $fail = 0 ]
